package postgres

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redactedError is an error whose message has had the connection string's
// password removed. It unwraps to its cause (nil when the cause itself
// holds the password verbatim, as pgx's parse errors do).
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// redaction replaces a password wherever it appears in a message.
const redaction = "xxxxx"

// keywordPassword finds password=value in a keyword/value connection string
// or a URL's query, the value bare or single-quoted.
var keywordPassword = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)`)

// redact returns msg with every form of connString's password in it
// replaced. connString may be malformed (that is often why there is a
// message at all), so the password is found by hand rather than with
// url.Parse alone.
func redact(msg, connString string) string {
	var secrets []string
	add := func(s string) {
		if s == "" {
			return
		}
		secrets = append(secrets, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			secrets = append(secrets, u)
		}
		if u, err := url.QueryUnescape(s); err == nil && u != s {
			secrets = append(secrets, u)
		}
	}
	// scheme://user:password@host…: the userinfo ends at the authority's
	// last '@', as url.Parse reads it.
	if _, rest, ok := strings.Cut(connString, "://"); ok {
		authority := rest
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
				add(pw)
			}
		}
	}
	if u, err := url.Parse(connString); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
	}
	for _, m := range keywordPassword.FindAllStringSubmatch(connString, -1) {
		v := m[1]
		add(v)
		if strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") && len(v) >= 2 {
			add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v[1 : len(v)-1]))
		}
	}
	// Longest first, so that a password is not half-replaced by a shorter
	// form of itself.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, redaction)
	}
	return msg
}
