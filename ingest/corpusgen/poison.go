package corpusgen

import (
	"encoding/binary"
	"hash/crc32"
)

// The rules a poison file breaks, as Manifest names them: the parser
// refuses binary data (a NUL byte, or more than one control character in
// twenty), the extractor text without words.
const (
	RuleNUL     = "nul-bytes"          // the file contains NUL bytes
	RuleControl = "control-characters" // more than one character in twenty is a control character
	RuleNoWords = "no-words"           // the text has no words at all
)

// poison makes the files ingestion must refuse, each breaking one rule.
// (Text that is not UTF-8 is no longer one: the parser reads it as
// Windows-1252.)
func (g *generator) poison() []doc {
	mk := func(path, rule, reason string, data []byte) doc {
		return doc{File: File{Path: path, Kind: KindPoison, Rule: rule, Reason: reason}, data: data}
	}
	return []doc{
		mk("poison/scan-0001.txt", RuleNUL,
			"binary data with NUL bytes: a PNG image saved under a .txt name", g.png()),
		mk("poison/terminal-capture.txt", RuleControl,
			"a terminal session recorded with its backspaces, bells and shift codes: binary data without a NUL byte", terminalCapture()),
		mk("poison/empty.md", RuleNoWords,
			"only blank lines, spaces and a tab: no words", []byte("\n   \n\t\n\n")),
		mk("poison/punctuation.txt", RuleNoWords,
			"only punctuation and symbols, valid UTF-8 but no words", []byte(punctuationText)),
	}
}

// png is a small, well-formed PNG file: a 64×48 RGB image whose pixel data
// is noise, as a scanner might save it.
func (g *generator) png() []byte {
	out := []byte("\x89PNG\r\n\x1a\n")
	chunk := func(kind string, data []byte) {
		out = binary.BigEndian.AppendUint32(out, uint32(len(data)))
		start := len(out)
		out = append(out, kind...)
		out = append(out, data...)
		out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(out[start:]))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, 64)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 48)
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8 bits, RGB, deflate, no filter, no interlace
	chunk("IHDR", ihdr)
	idat := make([]byte, 2048)
	for i := range idat {
		if g.intn(4) == 0 {
			continue // runs of zeros, as compressed scans have
		}
		idat[i] = byte(g.next())
	}
	chunk("IDAT", idat)
	chunk("IEND", nil)
	return out
}

// terminalCapture is a terminal session as a recorder keeps it: every
// keystroke, the backspaces that undo typing mistakes, the bells of
// completions that failed, the shift codes of a line-drawing program.
func terminalCapture() []byte {
	cmds := []string{"tail -f /var/log/syslog", "cd /srv/gauges", "ls -l", "grep level readings.csv", "vi notes.txt", "exit"}
	var b []byte
	for _, c := range cmds {
		b = append(b, "$ "...)
		// A mistyped start, erased, then the command and a failed
		// completion.
		b = append(b, c[:min(4, len(c))]...)
		for range min(4, len(c)) {
			b = append(b, '\b')
		}
		b = append(b, c...)
		b = append(b, '\a', '\a', 0x0e, 'q', 'q', 'x', 0x0f, 0x7f, '\n')
	}
	return b
}

const punctuationText = `--- *** !!! ??? ... ### $$$ %%% ^^^ &&& ((( ))) ~~~
<<< >>> === +++ ||| /// \\\ ::: ;;; ,,, ''' """ ___ [[[ ]]] {{{ }}}
¶ § † ‡ • — – … « » ¿ ¡ © ® ° ± × ÷ ← → ↑ ↓ ★ ☆ ♠ ♣ ♥ ♦ ※ ‰
*** --- *** --- *** --- *** --- *** --- *** --- *** --- ***
`
