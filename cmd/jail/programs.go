package main

import "github.com/jail-sandbox/jail/internal/programs"

// The jail command embeds the server and tools programs, which go generate
// builds (internal/programs/generate.sh); without them it would be another
// product, with no `serve`, no user profiles and no images. So a build
// without them stops here: "undefined: programs.RunMakeBuildOrGoGenerateInternalPrograms"
// means run `make build`, or `go generate ./internal/programs` first.
const _ = programs.RunMakeBuildOrGoGenerateInternalPrograms
