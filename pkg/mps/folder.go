package mps

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// Files of a daemon's folder (see the package documentation).
const (
	WantFile   = "want"
	ReadyFile  = "ready"
	FailedFile = "failed"
	pipeDir    = "pipe"
	logDir     = "log"
	shmDir     = "shm"
)

// Folder is the host folder of one daemon: card Card, cap Cap, under an MPS root. Its paths are
// the same in share-plugin's, gpushare-mps's and the clients' mount namespaces.
type Folder struct {
	Card string
	Cap  Cap
	Dir  string
}

// cardUUID is the form of an NVIDIA card UUID (and of share-plugin's simulated ones): it is a
// path element here, so nothing else may pass.
var cardUUID = regexp.MustCompile(`^GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$`)

// FolderOf is the folder of card's daemon for cap under root. Errors: card is not a card UUID
// (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or Cap.Validate refuses cap.
func FolderOf(root, card string, c Cap) (Folder, error) {
	if !cardUUID.MatchString(card) {
		return Folder{}, fmt.Errorf("MPS folder: card %q is not a GPU UUID", card)
	}
	if err := c.Validate(); err != nil {
		return Folder{}, err
	}
	return Folder{Card: card, Cap: c, Dir: filepath.Join(root, card, c.Name())}, nil
}

// Pipe is the daemon's CUDA_MPS_PIPE_DIRECTORY.
func (f Folder) Pipe() string { return filepath.Join(f.Dir, pipeDir) }

// Log is the daemon's CUDA_MPS_LOG_DIRECTORY.
func (f Folder) Log() string { return filepath.Join(f.Dir, logDir) }

// Shm is the daemon's and its clients' /dev/shm.
func (f Folder) Shm() string { return filepath.Join(f.Dir, shmDir) }

func (f Folder) file(name string) string { return filepath.Join(f.Dir, name) }

// Key is the daemon's identity: card and cap.
func (f Folder) Key() Key { return Key{Card: f.Card, Cap: f.Cap} }

// Key names one daemon: a card and a cap.
type Key struct {
	Card string
	Cap  Cap
}

func (k Key) String() string { return k.Card + "/" + k.Cap.Name() }
