// Package cgroups will place each sandbox in a cgroup of its own under the
// project's parent (memory, cpu and pids limits, OOM and usage reporting) on
// cgroup v1 and v2 through containerd/cgroups. Until it lands (issue 3) the
// limits in a Spec are validated but not enforced.
package cgroups
