package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/converge-go/converge/internal/browsertest"
)

// A test loads a page its server serves and checks what the browser
// rendered, after any script ran. Without Chromium the test is skipped
// (or fails under CONVERGE_INTEGRATION=1).
func ExampleBrowser_Load() {
	test := func(t *testing.T) { // func TestPageShouldRenderItsTitle(t *testing.T)
		b := browsertest.Find(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`<body><script>document.body.textContent = "render" + "ed"</script></body>`))
		}))
		t.Cleanup(srv.Close)
		page, err := b.Load(t.Context(), srv.URL, 800, 600)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(page.DOM, "rendered") {
			t.Errorf("the script did not run: %s", page.DOM)
		}
	}
	_ = test
}
