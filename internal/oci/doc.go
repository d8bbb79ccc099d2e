// Package oci is jail as an OCI runtime (`jail oci`, installed as
// `jail-runc` for containerd's runc shim; docs/oci.md): it reads a bundle,
// checks it, translates it into the helper's container role's description
// (config.Container), keeps each container's state under --root, and
// implements runc's command line on top.
//
// Invariants:
//   - A bundle is read once, through a descriptor of its directory:
//     config.json at most MaxConfig bytes, decoded into the runtime-spec
//     types (unknown properties ignored, as the spec asks).
//   - Validate is pure: it reads nothing but the spec, and refuses, with a
//     one-line "oci: ..." message, everything jail cannot realise and
//     everything malformed. Nothing the bundle asks for is dropped
//     silently; what the spec says to warn about is returned as warnings.
//   - Translate opens every host path it hands on once (namespace files,
//     checked to be nsfs files of the type named; the root, whose device
//     and inode are recorded) and passes descriptors, never paths that a
//     later reader would trust again. Descriptors attached to a
//     KindContainer are numbered from 4 in the order attached (3 is the
//     control socket).
//   - The state of a container is a directory of its own under the root
//     (0700), named by its ID (IDs are checked before any path is made of
//     them), locked with flock by every command that reads or changes it,
//     and written atomically (a temporary file renamed into place).
//   - A pid read from a state is only ever signalled through a pidfd whose
//     process has the start time recorded at create: a pid reused by
//     another process is never signalled, and reads as stopped.
//   - Nothing here is global: each command's options travel in values.
package oci
