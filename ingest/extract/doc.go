// Package extract is the extraction stage of the ingestion pipeline: from a
// document's text it derives a title, the language, a word count, key terms
// and a short summary.
//
// Two [Extractor]s are provided. [Local] is deterministic and does no I/O:
//
//   - Title: Input.Title if set, else the first non-empty line, trimmed, at
//     most 120 runes (cut on a word boundary when there is one in its second
//     half).
//   - Language: the ISO 639-1 code (en, fr, de, es, it, nl, pt) whose stop
//     words are most frequent, each stop word counting 1/k when it is a stop
//     word of k of these languages. It is "und" unless the best language
//     scores at least 2, at least 1.5 times the runner-up, and at least 8%
//     of the words.
//   - WordCount: the runs of letters, digits and marks, an apostrophe or a
//     hyphen between two of them joining a run ("don't", "state-of-the-art"
//     and "l'homme" are one word each).
//   - KeyTerms: up to 10 lower-case words by frequency, ties broken by first
//     appearance; stop words of the detected language (of all of them when
//     it is "und"), elided articles ("l'", "d'", "dell'"), words shorter than
//     two runes and words without a letter are left out, and an English
//     possessive "'s" is dropped.
//   - Summary: the lead: whole sentences from the start, while they fit in
//     300 runes. When the first sentence alone is longer, it is cut on a word
//     boundary and ends with "…", still within 300 runes. A first paragraph
//     that is the title (with no closing punctuation) is skipped.
//
// [LLM] asks an OpenAI-compatible chat-completions endpoint for the title,
// language, key terms and summary, and computes the word count locally. Its
// HTTP client is weir's resilience transport: each attempt goes through a
// circuit breaker, and 429 and 5xx answers are retried with backoff,
// honouring Retry-After, all with the defaults of weir's resilience spec
// (see [LLMConfig]).
//
// # Errors
//
// Poison input is refused before any work, and by LLM before any call, with
// an error that matches [ErrNotText] and that the retry package sees as
// permanent ([retry.IsPermanent]), so the job engine dead-letters the job at
// once instead of retrying it. Text is poison when it contains a NUL byte,
// is not valid UTF-8, or has no words (it is empty, blank, or only
// punctuation and symbols).
//
// The LLM's other errors:
//
//   - the breaker is open: an [*UnavailableError], at once and without a
//     request. It matches [breaker.ErrOpen] and errors.As finds the
//     [*breaker.OpenError] with its RetryIn, so a stage can snooze until
//     the next probe instead of spending attempts. It is not permanent, and
//     its retry-after hint ([retry.AfterHint]) is the RetryIn. The call
//     whose own failure opens the breaker returns one too, wrapping that
//     failure.
//   - a non-2xx answer: a [*StatusError]. It is permanent for a 4xx other
//     than 408 and 429; otherwise retryable, carrying the server's
//     Retry-After as a retry-after hint.
//   - an answer that cannot be read (not JSON, no choices, a content that is
//     not the JSON object asked for): it matches [ErrBadAnswer], names the
//     problem and is retryable.
//   - a transport error after the transport's own retries: wrapped, and
//     retryable, whatever the transport decided for its call: the job
//     engine's attempts and backoff are the longer-term retry.
//
// The API key is sent only in the Authorization header; it is never logged
// nor put in an error. An endpoint or proxy that echoes it back (the
// request's headers in an error page, the token in an error message) does
// not change that: every error Extract returns, every line the extractor
// logs and every retry event it reports go through weir's redaction, with
// the key as a named secret, and show "[REDACTED]" in its place.
//
// # Cost
//
// Local reads a text once for its words and keeps each distinct term's
// count, not a list of the words; the summary reads paragraphs only until
// it is full. Its memory grows with the vocabulary, not with the text (a
// 20 MB text allocates kilobytes). LLM sends at most MaxInputRunes runes,
// cut without copying the text.
package extract
