package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// File is one regular file of the image.
type File struct {
	Path string // absolute path inside the image
	Mode int64
	Data []byte
}

// Image is a single-layer linux image.
type Image struct {
	Tag string // e.g. gpushare.local/gpuenv:v1
	// Arch is the GOARCH the files are built for (amd64 when empty): runtimes refuse, or
	// pick another image of a list, when it is not the node's.
	Arch       string
	Entrypoint []string
	// User is the numeric "uid:gid" the entrypoint runs as; empty leaves the runtime's
	// default (root). Numeric because the image has no /etc/passwd, and kubelet can check
	// runAsNonRoot only against a numeric user.
	User  string
	Files []File
}

// emptyDirs exist in every image so runtimes can mount /proc, /dev, /etc/hosts and friends
// without creating them in a read-only spot.
var emptyDirs = []string{"dev", "etc", "proc", "sys", "tmp", "var", "var/run"}

// epoch keeps the layer bytes, and so the image ID, reproducible.
var epoch = time.Unix(0, 0).UTC()

// Write emits img as a `docker save` tarball: manifest.json, <config sha>.json and
// <layer sha>/layer.tar.
func Write(w io.Writer, img Image) error {
	layer, err := layerTar(img.Files)
	if err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(layerSum[:])
	runConfig := map[string]any{
		"Entrypoint": img.Entrypoint,
		"Env":        []string{"PATH=/"},
	}
	if img.User != "" {
		runConfig["User"] = img.User
	}
	arch := img.Arch
	if arch == "" {
		arch = "amd64"
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       runConfig,
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + layerHex},
		},
	})
	if err != nil {
		return fmt.Errorf("encoding image config: %w", err)
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := layerHex + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{img.Tag},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return fmt.Errorf("encoding manifest: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := path.Dir(e.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
				return fmt.Errorf("writing %s: %w", dir, err)
			}
		}
		if err := writeFile(tw, e.name, 0o644, e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing image tarball: %w", err)
	}
	return nil
}

// layerTar builds the layer: the empty directories, each file's parent directories, the files.
func layerTar(files []File) ([]byte, error) {
	dirs := map[string]bool{}
	for _, d := range emptyDirs {
		dirs[d] = true
	}
	for _, f := range files {
		for d := path.Dir(strings.TrimPrefix(path.Clean(f.Path), "/")); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, d := range names {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: epoch}); err != nil {
			return nil, fmt.Errorf("writing layer dir %s: %w", d, err)
		}
	}
	for _, f := range files {
		if err := writeFile(tw, strings.TrimPrefix(path.Clean(f.Path), "/"), f.Mode, f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing layer: %w", err)
	}
	return b.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: epoch}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
