package corpusgen

import (
	"encoding/binary"
	"hash/crc32"
)

// The extractor's rules a poison file breaks, as Manifest names them.
const (
	RuleNUL         = "nul-bytes"    // the text contains NUL bytes
	RuleInvalidUTF8 = "invalid-utf8" // the text is not valid UTF-8
	RuleNoWords     = "no-words"     // the text has no words at all
)

// poison makes the files the extractor must refuse, each breaking one rule
// (the mislabelled image, being binary, is not valid UTF-8 either).
func (g *generator) poison() []doc {
	mk := func(path, rule, reason string, data []byte) doc {
		return doc{File: File{Path: path, Kind: KindPoison, Rule: rule, Reason: reason}, data: data}
	}
	return []doc{
		mk("poison/scan-0001.txt", RuleNUL,
			"binary data with NUL bytes: a PNG image saved under a .txt name", g.png()),
		mk("poison/latin1-garbage.txt", RuleInvalidUTF8,
			"French text encoded as ISO-8859-1, which is not valid UTF-8", latin1(latin1Text)),
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

const latin1Text = `Recettes de la grand-mère

Crème brûlée à la façon de la Côte-d'Or : faites chauffer le lait et la
crème, ajoutez la vanille, puis versez sur les jaunes d'oeufs battus avec
le sucre. Faites cuire à four doux. Au moment de servir, saupoudrez de
cassonade et caramélisez. Déjà, l'été dernier, nous en avions préparé
pour la fête du village ; les enfants ont adoré.
`

// latin1 encodes s, whose runes are all below U+0100, as ISO-8859-1.
func latin1(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			r = '?'
		}
		out = append(out, byte(r))
	}
	return out
}

const punctuationText = `--- *** !!! ??? ... ### $$$ %%% ^^^ &&& ((( ))) ~~~
<<< >>> === +++ ||| /// \\\ ::: ;;; ,,, ''' """ ___ [[[ ]]] {{{ }}}
¶ § † ‡ • — – … « » ¿ ¡ © ® ° ± × ÷ ← → ↑ ↓ ★ ☆ ♠ ♣ ♥ ♦ ※ ‰
*** --- *** --- *** --- *** --- *** --- *** --- *** --- ***
`
