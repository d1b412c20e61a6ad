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
// A text or Markdown file is decoded to UTF-8 first, and its CRLF line
// ends become LF. The encoding is decided thus:
//
//   - A byte-order mark names it: UTF-8, UTF-16 (little- or big-endian) or
//     UTF-32; the mark is dropped. Malformed code units become U+FFFD.
//   - Without one, a file that contains a NUL byte is binary.
//   - Otherwise it is UTF-8 if it is valid UTF-8, or if its valid multi-byte
//     sequences outnumber its invalid bytes (UTF-8 with a few stray bytes,
//     which become U+FFFD); else it is Windows-1252, the superset of ISO
//     8859-1 (Latin-1) for printable text (its five unassigned bytes become
//     U+FFFD).
//
// Decoded text is binary when it holds a NUL character, or when control
// characters (C0 other than tab, line feed, vertical tab, form feed,
// carriage return and escape; DEL; C1) are more than 1 in 20 of its
// characters. A binary file is a [*NotTextError], matching [ErrNotText].
// So every Doc's Title, Text and Meta are valid UTF-8 without NUL.
//
// The text of a text file is returned as it is, decoded.
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
// matter. Backslash escapes and entity and numeric character references
// (&amp;, &#233;) are resolved. Emphasis is matched in pairs within a line,
// and an underscore inside a word (snake_case) is never emphasis. An HTML
// block (a line that starts with a block-level tag, a comment, script,
// style or pre) becomes its text, read with golang.org/x/net/html; an
// inline tag (<b>, </span>) is dropped, <br> becomes a line break.
//
// Reading Markdown takes time linear in its size (n log n at worst, for a
// line full of brackets), whatever the input: 1 MB of unclosed brackets,
// links, emphasis or nested quotes takes well under a second.
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
// base64, 7bit, 8bit, binary) and its charset, any of the WHATWG Encoding
// Standard's labels (golang.org/x/text's htmlindex: the ISO 8859 family,
// Windows code pages, KOI8, Shift JIS, EUC, GB18030, Big5, UTF-16…);
// ISO 8859-1 and US-ASCII are read as Windows-1252, as mail readers do. A
// body without a charset, or labelled US-ASCII, is read as a text file
// without a byte-order mark is (UTF-8, or Windows-1252 when it is not);
// so is a body whose charset is unknown or does not match its bytes, with
// a parse_error saying so. A text part that is binary, as for a text file,
// is left out with a parse_error. A multipart message gives its text/plain
// part: for multipart/alternative the text/plain alternative, for other
// multiparts every inline text/plain part, joined with a blank line. A
// text/html body is used only when there is no text/plain one, as its text
// (golang.org/x/net/html).
//
// [Mbox] reads an mbox from an io.Reader one message at a time, for a
// caller that does not hold the file in memory; File uses it.
//
// Nothing disappears silently. A message that net/mail cannot read becomes
// a Doc holding its raw text (read as a text file is, NUL made U+FFFD),
// with Meta["parse_error"] saying why; so does text before the first
// "From " line. A message whose body cannot be decoded (a bad base64 body)
// keeps its headers and its raw body, again with Meta["parse_error"]. Only an mbox without any "From "
// line is an error, [ErrNotMbox].
package parse
