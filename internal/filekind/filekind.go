// Package filekind names the kind of a file that is not a regular one, for
// the errors of the places that refuse such a file (secret and key files,
// backups to restore, report paths): "a named pipe", "a directory".
package filekind

import "io/fs"

// Of names the kind of m, a mode that is not a regular file's.
func Of(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "not a plain file"
	}
}
