package pipeline

import "github.com/weirhq/weir/ingest/parse"

// SetParser makes s parse files with f instead of parse.File.
func SetParser(s *Service, f func(name string, data []byte) ([]parse.Doc, error)) { s.parseFile = f }

// SetBeforeOpen makes s's scan call f between its check of a file (the
// walk's lstat) and the file's opening.
func SetBeforeOpen(s *Service, f func(rel string)) { s.beforeOpen = f }

// ConfigOf is s's configuration, its defaults filled in.
func ConfigOf(s *Service) Config { return s.cfg }
