package extract

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeAnswer: the model's answer is untrusted input. Decoding it never
// panics, fails only with ErrBadAnswer, and merging never breaks a Result's
// limits.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"message":{"content":"{\"title\":\"t\",\"language\":\"en\",\"key_terms\":[\"a\"],\"summary\":\"s\"}"}}]}`,
		`{"choices":[{"message":{"content":"` + "```json\\n{}\\n```" + `"}}]}`,
		`{"choices":[]}`, `{}`, `null`, `[]`, `{"choices":[{"message":{"content":null}}]}`,
		`{"choices":[{"message":{"content":"{\"key_terms\":[\"\",\"A\",\"a\"]}{"}}]}`,
	} {
		f.Add([]byte(s))
	}
	l := &LLM{model: "m", maxRunes: 10}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := decodeAnswer(raw)
		if err != nil {
			if !errors.Is(err, ErrBadAnswer) {
				t.Fatalf("error %v does not match ErrBadAnswer", err)
			}
			return
		}
		r := l.result(Input{Text: "some words here"}, a)
		if utf8.RuneCountInString(r.Title) > MaxTitleRunes || len(r.KeyTerms) > MaxKeyTerms || r.Language == "" || r.WordCount != 3 {
			t.Fatalf("result %+v breaks a limit", r)
		}
	})
}
