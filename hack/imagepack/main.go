// Command imagepack packs static binaries into a one-layer image tarball in the
// `docker save` format (manifest.json + config + layer), which `ctr images import` accepts.
// The local cluster has no registry and no Docker, so its images are built this way.
//
//	imagepack -o gpuenv.tar -tag gpushare.local/gpuenv:v1 -entrypoint /gpuenv bin/gpuenv=/gpuenv
//	imagepack -o extender.tar -tag gpushare/extender:v0.1.0 -user 65534:65534 bin/extender=/usr/bin/extender
//	imagepack -o extender-arm64.tar -tag gpushare/extender:v0.1.0 -arch arm64 dist/extender_linux_arm64=/usr/bin/extender
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", "", "output tarball (required)")
	tag := flag.String("tag", "", "image reference, e.g. gpushare.local/gpuenv:v1 (required)")
	entry := flag.String("entrypoint", "", "entrypoint path inside the image (default: the first file)")
	usr := flag.String("user", "", "numeric uid:gid the entrypoint runs as (default: the runtime's, root)")
	arch := flag.String("arch", "amd64", "architecture the files are built for: amd64 or arm64")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s -o OUT -tag REF [-entrypoint PATH] [-user UID:GID] [-arch amd64|arm64] HOSTFILE=IMAGEPATH...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*out, *tag, *entry, *usr, *arch, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "imagepack:", err)
		os.Exit(1)
	}
}

func run(out, tag, entry, usr, arch string, args []string) error {
	if out == "" || tag == "" || len(args) == 0 {
		return fmt.Errorf("-o, -tag and at least one HOSTFILE=IMAGEPATH are required")
	}
	if err := validUser(usr); err != nil {
		return err
	}
	// The architectures the release builds; anything else is a typo that would make an
	// image no node can run.
	if arch != "amd64" && arch != "arm64" {
		return fmt.Errorf("-arch %q: want amd64 or arm64", arch)
	}
	var files []File
	for _, a := range args {
		host, img, ok := strings.Cut(a, "=")
		if !ok || host == "" || !strings.HasPrefix(img, "/") {
			return fmt.Errorf("argument %q: want HOSTFILE=/absolute/image/path", a)
		}
		data, err := os.ReadFile(host)
		if err != nil {
			return fmt.Errorf("reading %s: %w", host, err)
		}
		files = append(files, File{Path: img, Mode: 0o755, Data: data})
	}
	if entry == "" {
		entry = files[0].Path
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".imagepack-*")
	if err != nil {
		return fmt.Errorf("creating output: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, Image{Tag: tag, Arch: arch, Entrypoint: []string{entry}, User: usr, Files: files}); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return os.Rename(tmp.Name(), out)
}

// validUser accepts "", "UID" and "UID:GID" with decimal IDs.
func validUser(u string) error {
	if u == "" {
		return nil
	}
	ids := strings.Split(u, ":")
	if len(ids) > 2 {
		return fmt.Errorf("-user %q: want a numeric UID or UID:GID (the image has no /etc/passwd)", u)
	}
	for _, id := range ids {
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return fmt.Errorf("-user %q: want a numeric UID or UID:GID (the image has no /etc/passwd)", u)
		}
	}
	return nil
}
