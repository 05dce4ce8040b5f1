package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
)

// writeGzip writes content gzip-compressed to path, unless path already
// holds a gzip stream of exactly content: compressors of other Go
// releases may write other bytes for the same content, and an unchanged
// file must stay unchanged.
func writeGzip(path string, content []byte) error {
	if old, err := readGzip(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := w.Write(content); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// readGzip returns the decompressed content of the gzip file at path.
func readGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
