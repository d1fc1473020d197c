package mps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Want is the content of a daemon's want file: share-plugin needs this daemon since Since
// (the last container it handed the daemon to).
type Want struct {
	Card  string    `json:"card"`
	Cap   Cap       `json:"cap"`
	Since time.Time `json:"since"`
}

// Ready is the content of a daemon's ready file: gpushare-mps started the control daemon (Pid,
// in gpushare-mps's PID namespace) at Since and it answered with Cap set.
type Ready struct {
	Pid   int       `json:"pid"`
	Cap   Cap       `json:"cap"`
	Since time.Time `json:"since"`
}

// Request writes f's want file (creating its folder), so that gpushare-mps starts the daemon
// if it does not run yet; now becomes Want.Since. The file is replaced whole (rename), so a
// reader never sees half of it. Errors: the folder or the file cannot be written.
func Request(f Folder, now time.Time) error {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("requesting MPS daemon %s: %w", f.Key(), err)
	}
	return writeJSON(f.file(WantFile), Want{Card: f.Card, Cap: f.Cap, Since: now.UTC()})
}

// Release removes f's want file: share-plugin no longer needs the daemon, and gpushare-mps
// stops it. A missing file is no error.
func Release(f Folder) error {
	if err := os.Remove(f.file(WantFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("releasing MPS daemon %s: %w", f.Key(), err)
	}
	return nil
}

// AwaitReady waits, polling every poll, until f's daemon is ready with f's cap, and returns
// its ready record. It writes the want again whenever it is missing (gpushare-mps may have
// been removing the folder of an unwanted daemon of the same cap when Request wrote it).
// Errors: ctx ends first (the error quotes gpushare-mps's failed file when there is one), or
// the want cannot be written.
func AwaitReady(ctx context.Context, f Folder, poll time.Duration, now func() time.Time) (Ready, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if r, err := readReady(f); err == nil && r.Cap == f.Cap {
			return r, nil
		}
		if _, err := os.Stat(f.file(WantFile)); errors.Is(err, fs.ErrNotExist) {
			if err := Request(f, now()); err != nil {
				return Ready{}, err
			}
		}
		select {
		case <-ctx.Done():
			why := "gpushare-mps did not report it ready"
			if b, err := os.ReadFile(f.file(FailedFile)); err == nil && len(b) > 0 {
				why = "gpushare-mps could not start it: " + strings.TrimSpace(string(b))
			}
			return Ready{}, fmt.Errorf("MPS daemon %s: %s (%w)", f.Key(), why, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func readReady(f Folder) (Ready, error) {
	var r Ready
	b, err := os.ReadFile(f.file(ReadyFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", f.file(ReadyFile), err)
	}
	return r, nil
}

// Entry is one daemon folder found under an MPS root, with its want and ready records (nil
// when the file is absent or unreadable).
type Entry struct {
	Folder Folder
	Want   *Want
	Ready  *Ready
}

// Scan lists the daemon folders under root, in path order. A folder whose names are not a card
// UUID and a cap name is skipped and named in the returned problems; so is a want or ready
// file that does not parse (the entry is kept, without it). Errors: root cannot be read (a
// missing root is an empty list).
func Scan(root string) ([]Entry, []error, error) {
	cards, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing MPS root %s: %w", root, err)
	}
	var out []Entry
	var problems []error
	for _, c := range cards {
		if !c.IsDir() || strings.HasPrefix(c.Name(), ".") {
			continue
		}
		caps, err := os.ReadDir(filepath.Join(root, c.Name()))
		if err != nil {
			problems = append(problems, fmt.Errorf("listing %s: %w", filepath.Join(root, c.Name()), err))
			continue
		}
		for _, d := range caps {
			if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
				continue
			}
			e, err := scanOne(root, c.Name(), d.Name())
			if err != nil {
				problems = append(problems, err)
			}
			if e.Folder.Dir != "" {
				out = append(out, e)
			}
		}
	}
	return out, problems, nil
}

func scanOne(root, card, name string) (Entry, error) {
	c, err := ParseCapName(name)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", filepath.Join(root, card, name), err)
	}
	f, err := FolderOf(root, card, c)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", filepath.Join(root, card, name), err)
	}
	e := Entry{Folder: f}
	var problem error
	if b, err := os.ReadFile(f.file(WantFile)); err == nil {
		var w Want
		if err := json.Unmarshal(b, &w); err != nil || w.Card != card || w.Cap != c {
			problem = fmt.Errorf("%s: not a want of this folder's card and cap", f.file(WantFile))
		} else {
			e.Want = &w
		}
	}
	if r, err := readReady(f); err == nil {
		e.Ready = &r
	}
	return e, problem
}

// writeJSON replaces path with v's JSON through a temporary file in the same folder.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
