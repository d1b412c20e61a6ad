// Package redact removes credentials from text that weir stores or
// prints: error messages, logs, dead letters and failure files.
//
// It knows three shapes of secret: a URL's password (scheme://user:pw@host),
// an HTTP credential header as an upstream may echo it back
// (Authorization, Proxy-Authorization, X-Api-Key, Api-Key, Cookie, in
// header or JSON form, and a bare "Bearer <token>"), and the exact values
// of secrets the caller names (a configured API key, or what Credentials
// reads from a request).
package redact

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask is what a secret is replaced with.
const Mask = "[REDACTED]"

// minSecret is the shortest named secret that is replaced: a shorter one
// would blank out ordinary words.
const minSecret = 4

var (
	// urlUserinfo finds scheme://user:password@ in text.
	urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@"'<>]*):([^\s@/"'<>]+)@`)
	// credentialHeader finds a credential header and its value, in header
	// form (Authorization: Bearer x), JSON form ("authorization":"x"), as
	// JSON or Go print an http.Header ("Authorization":["x"],
	// map[Authorization:[x]]).
	credentialHeader = regexp.MustCompile(`(?i)("?(?:(?:proxy-)?authorization|x-api-key|api[-_]key|cookie)"?\s*[:=]\s*\[?\s*"?)([^"\r\n,}\]]+)`)
	// bearer finds a bare bearer or basic credential.
	bearer = regexp.MustCompile(`(?i)\b(bearer|basic)\s+([A-Za-z0-9\-._~+/]+=*)`)
)

// String returns s with every credential it recognises, and every one of
// secrets (those at least 4 bytes long), replaced by Mask.
func String(s string, secrets ...string) string {
	if s == "" {
		return s
	}
	named := make([]string, 0, len(secrets))
	for _, sec := range secrets {
		if len(sec) >= minSecret {
			named = append(named, sec)
		}
	}
	// Longest first, so that no secret is half-replaced by a shorter one
	// it contains.
	slices.SortFunc(named, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range named {
		s = strings.ReplaceAll(s, sec, Mask)
	}
	s = urlUserinfo.ReplaceAllString(s, "$1:"+Mask+"@")
	s = credentialHeader.ReplaceAllStringFunc(s, func(m string) string {
		sub := credentialHeader.FindStringSubmatch(m)
		return sub[1] + Mask
	})
	s = bearer.ReplaceAllString(s, "$1 "+Mask)
	return s
}

// credentialHeaders are the request headers whose values are credentials.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Api-Key", "X-Api-Key", "Cookie"}

// Credentials returns the secrets a request carries, to pass to String or
// Error so that they are removed in whatever form an upstream echoes them:
// the value of each credential header (Authorization, Proxy-Authorization,
// Api-Key, X-Api-Key, Cookie), the token after an auth scheme ("Bearer
// x" gives x too), each cookie's value, and the URL's password. Either
// argument may be nil.
func Credentials(h http.Header, u *url.URL) []string {
	var out []string
	for _, name := range credentialHeaders {
		for _, v := range h[name] {
			v = strings.TrimSpace(v)
			out = append(out, v)
			if _, token, ok := strings.Cut(v, " "); ok && name != "Cookie" {
				out = append(out, strings.TrimSpace(token))
			}
			if name == "Cookie" {
				cookies, _ := http.ParseCookie(v)
				for _, c := range cookies {
					out = append(out, c.Value)
				}
			}
		}
	}
	if u != nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	return out
}

// URL returns raw with its password, if any, replaced by Mask. A raw
// string that does not parse as a URL is passed through String.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return String(raw)
	}
	if _, ok := u.User.Password(); !ok {
		return raw
	}
	u.User = url.UserPassword(u.User.Username(), Mask)
	// url.String escapes the brackets of the mask; keep it readable.
	return strings.Replace(u.String(), url.QueryEscape(Mask), Mask, 1)
}

// Error returns err with its message redacted as String does; nil for nil.
// The result unwraps to err, so errors.Is and errors.As see through it,
// but its Error() never shows what was removed. When nothing needed
// removing, err itself is returned.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := String(msg, secrets...)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, cause: err}
}

type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// Is reports whether err's message was redacted by Error.
func Is(err error) bool {
	var r *redactedError
	return errors.As(err, &r)
}
