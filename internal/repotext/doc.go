// Package repotext holds a test of the repository's own text: code,
// comments, scripts and documents speak of the project only. They name no
// tracker issue, no working session and no file outside the repository,
// so that what a reader finds is the design and its reasons, not the history
// of how it was written. The package has no code.
package repotext
