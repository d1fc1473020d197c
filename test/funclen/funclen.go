package funclen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// MaxLines is the most lines a product function may span.
const MaxLines = 80

// Long is one function over MaxLines: where it starts (path:line), its name (Recv.Name for
// a method) and its length in lines.
type Long struct {
	Pos   string
	Name  string
	Lines int
}

func (l Long) String() string {
	return fmt.Sprintf("%s: %s is %d lines (at most %d)", l.Pos, l.Name, l.Lines, MaxLines)
}

// Check returns the functions over max lines in the non-test .go files under each of dirs
// (walked in lexical order; a missing folder holds none), paths shown relative to root.
// Errors: a folder that cannot be walked or a file that does not parse.
func Check(root string, dirs []string, max int) ([]Long, error) {
	var out []Long
	fset := token.NewFileSet()
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			long, err := checkFile(fset, root, path, max)
			out = append(out, long...)
			return err
		})
		if err != nil && !isNotExist(err) {
			return nil, err
		}
	}
	return out, nil
}

// checkFile returns the functions of the file at path over max lines.
func checkFile(fset *token.FileSet, root, path string, max int) ([]Long, error) {
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		rel = path
	}
	var out []Long
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > max {
			out = append(out, Long{Pos: fmt.Sprintf("%s:%d", filepath.ToSlash(rel), start), Name: funcName(fn), Lines: n})
		}
	}
	return out, nil
}

// funcName is fn's name, Recv.Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// isNotExist reports whether err says a walked folder does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
