package debugpage

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// loopbackOnly answers 403 to clients whose address is not loopback, and
// to requests whose Host is not a loopback name: a page of another site
// whose name was made to resolve to 127.0.0.1 (DNS rebinding) would
// otherwise read the pages from the user's own browser.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			forbid(w, r, "debug pages answer loopback clients only (ManagerOptions.Debug.AllowRemote)")
			return
		}
		if !loopbackHost(r.Host) {
			forbid(w, r, fmt.Sprintf("debug pages answer requests for localhost, 127.0.0.1 or [::1] only, not Host %q "+
				"(ManagerOptions.Debug.AllowRemote)", r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's loopback:
// localhost or a loopback address, with any port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// forbid answers 403, in JSON if the client asked for it.
func forbid(w http.ResponseWriter, r *http.Request, msg string) {
	pageError(w, r, msg, http.StatusForbidden)
}

// pageError answers an error, as {"Error": msg} if the client asked for
// JSON, else as text.
func pageError(w http.ResponseWriter, r *http.Request, msg string, code int) {
	if !wantsJSON(r) {
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct{ Error string }{msg})
}
