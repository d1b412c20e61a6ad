// Package parse turns an incoming file into the documents it holds.
//
// [File] picks the format from the file name's extension, case-insensitive:
//
//	.txt .text      text: one document, the file as it is
//	.md .markdown   markdown: one document, lightly stripped of markup
//	.mbox           mbox: one document per message
//
// Any other extension, or none, is an [*UnsupportedError] that matches
// [ErrUnsupported]. Every [Doc] has Meta["format"] set to "text",
// "markdown" or "mbox".
//
// # Text
//
// The text is returned as it is, but for a leading UTF-8 byte-order mark,
// which is dropped, and CRLF line ends, which become LF. The bytes are not
// transcoded: text that is not UTF-8 stays so, for the extraction stage to
// refuse.
//
// # Markdown
//
// The title is the first heading (ATX "# Title" or setext, a line
// underlined with === or ---), or failing one the "title:" of a YAML front
// matter block. The text keeps the words and drops the markup: heading
// markers, emphasis and strike-through delimiters, inline-code backticks,
// code-fence lines (the code itself is kept), link and image syntax (the
// link text and image alt text are kept, the URL is dropped), reference
// definitions, block-quote and bullet markers, thematic breaks and the front
// matter. Backslash escapes are resolved. Emphasis is matched in pairs within
// a line, and an underscore inside a word (snake_case) is never emphasis.
//
// # Mbox
//
// The file is split on lines that begin with "From " (mboxo and mboxrd);
// in each message a line of one or more '>' followed by "From " loses one
// '>', which undoes both formats' quoting. Each message is read with
// net/mail. Its Key is its position, "#1", "#2", …; its Title the decoded
// Subject; Meta holds "from", "date", "subject" and "message_id" (the date
// in RFC 3339 when it can be read, otherwise as written; the others
// decoded from RFC 2047 encoded words).
//
// The body is decoded per its Content-Transfer-Encoding (quoted-printable,
// base64, 7bit, 8bit, binary) and its charset: utf-8 and us-ascii as they
// are, iso-8859-1 (latin1) and windows-1252 into UTF-8. A multipart message
// gives its text/plain part: for multipart/alternative the text/plain
// alternative, for other multiparts every inline text/plain part, joined
// with a blank line. A text/html body is used only when there is no
// text/plain one, with its tags removed.
//
// Nothing disappears silently. A message that net/mail cannot read becomes
// a Doc holding its raw text, with Meta["parse_error"] saying why; so does
// text before the first "From " line. A message whose body cannot be
// decoded (a bad base64 body, an unknown charset) keeps its headers and its
// raw body, again with Meta["parse_error"]. Only an mbox without any "From "
// line is an error, [ErrNotMbox].
package parse
