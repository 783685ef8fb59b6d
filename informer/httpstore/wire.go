package httpstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// The error codes of the protocol (see the package documentation), with the
// status each is sent with.
const (
	codeBadRequest       = "BadRequest"
	codeUnauthorized     = "Unauthorized"
	codeForbidden        = "Forbidden"
	codeNotFound         = "NotFound"
	codeMethodNotAllowed = "MethodNotAllowed"
	codeConflict         = "Conflict"
	codeExpired          = "Expired"
	codeTooLarge         = "TooLarge"
	codeInvalid          = "Invalid"
	codeInternal         = "Internal"
	codeUnavailable      = "Unavailable"
)

// The event types of a watch stream.
const (
	typePut      = "PUT"
	typeDelete   = "DELETE"
	typeBookmark = "BOOKMARK"
	typeError    = "ERROR"
)

// wireEntry is one listed or got key. Value is absent when Error is set.
type wireEntry struct {
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value,omitempty"`
	Revision uint64          `json:"revision,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// wireList is a list response.
type wireList struct {
	Revision uint64      `json:"revision"`
	Entries  []wireEntry `json:"entries"`
}

// wireWrite is a write's response.
type wireWrite struct {
	Revision uint64 `json:"revision"`
}

// wireEvent is one line of a watch stream. Code is set on ERROR only; Error
// on a PUT whose value the store could not decode, and on ERROR.
type wireEvent struct {
	Type     string          `json:"type"`
	Key      string          `json:"key,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	Revision uint64          `json:"revision,omitempty"`
	Code     string          `json:"code,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// wireError is the body of every refused request.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Sentinels an *Error matches with errors.Is, besides informer.ErrConflict
// (409) and informer.ErrRevisionExpired (410).
var (
	// ErrUnauthorized: the server knows no such bearer token, or none was
	// sent (401).
	ErrUnauthorized = errors.New("httpstore: unauthorized")
	// ErrForbidden: the token may only read (403).
	ErrForbidden = errors.New("httpstore: forbidden")
	// ErrInvalid: the server's validation hook refused the value (422).
	ErrInvalid = errors.New("httpstore: invalid value")
	// ErrTooLarge: the request body is over the server's limit (413).
	ErrTooLarge = errors.New("httpstore: request too large")
)

// Error is what a Client returns for a request the server refused, or for
// a response it could not read as the protocol's. It matches, with
// errors.Is, informer.ErrConflict for a conflict, informer.ErrRevisionExpired
// for an expired revision, and ErrUnauthorized, ErrForbidden, ErrInvalid or
// ErrTooLarge as its Code says.
type Error struct {
	// Op is the operation and its target: "create k1", "watch after 7".
	Op string
	// URL is the request's URL.
	URL string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the protocol's error code (see the package documentation);
	// empty when the response was not the protocol's (a wrong URL, a proxy).
	Code string
	// Message is the server's explanation, or what the response held.
	Message string

	sentinel error
}

// Error says what was refused, where, with which status and why.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = "not an httpstore response"
	}
	return fmt.Sprintf("httpstore: %s: %s %d %s (%s): %s", e.Op, e.URL, e.StatusCode, http.StatusText(e.StatusCode), code, e.Message)
}

// Unwrap returns the sentinel the error's Code stands for, if any.
func (e *Error) Unwrap() error { return e.sentinel }
