// Package config reads a service's configuration from flags and environment
// variables into a struct, once, with every problem reported together.
//
// Precedence is flag, then environment variable, then default. Every flag
// has an environment twin named TOOLCRIB_<FLAG> (upper case, `-` as `_`)
// unless the caller names another, so a container can be configured without
// a command line.
package config
