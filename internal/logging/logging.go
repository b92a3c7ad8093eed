// Package logging builds the zap loggers of cast's daemons.
package logging

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

// New returns a JSON logger ("json", for production) or a console logger
// ("console", for --dev and people), at level ("debug", "info", ...),
// writing to stderr. Console levels are coloured only when stderr is a
// terminal and NO_COLOR is unset (no-color.org): never into a file or pipe.
func New(format, level string) (*zap.Logger, error) {
	var cfg zap.Config
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		if Colour(os.Stderr, os.Getenv) {
			cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		cfg.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("log format %q: use json or console", format)
	}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	return cfg.Build()
}

// Colour reports whether output to f may carry colour escapes: f is a
// terminal and NO_COLOR is unset or empty.
func Colour(f *os.File, getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}
