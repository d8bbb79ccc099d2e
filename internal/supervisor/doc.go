// Package supervisor is the host side of jail's sandboxes: it starts a
// sandbox's init in its namespaces and cgroup from a resolved Plan, sends
// it its description and its command over the control socket, relays the
// command's output, signals and terminal, and tears everything down once
// the command is over; and it keeps the Pools of sandboxes built ahead of
// need. Package jail validates and resolves a Spec into a Plan and a Job;
// nothing here reads a profile, an image or a user's request.
//
// supervisor_linux.go boots a sandbox, gives it its command, listens to its
// init and tears it down; init_linux.go starts the init (from here or by a
// pool's forker); cgroup_linux.go makes the cgroup and starts its janitor;
// command_linux.go connects the command's stdio, terminal and signals;
// pool_linux.go keeps the Pools.
//
// # Concurrency
//
// One supervisor is one sandbox. Its goroutines, and what each owns:
//
//   - The owner: the goroutine that called Run or Pool.Run (runCold,
//     finish), or, for a pooled sandbox until its handout, the pool's filler
//     that built it (boot, then discard if no run takes it). It owns every
//     field of the supervisor that is not listed below, and is the only
//     one to send on the control socket.
//   - The listener (boot): reads the init's reports until the socket
//     closes. It closes ready (KindReady), sends the exit report on
//     exitReport (KindExit), hands the command's pidfd to the commandHandle
//     and its terminal to attachTerminal (KindStarted), and sends
//     everything the init said on reports when the socket closes.
//   - The reaper (boot): waits for the init, writes usage, closes reaped,
//     then sends the wait status on waited.
//   - The output copiers, one per stream (connectStdio; one on the
//     terminal with a TTY): copy a pipe into its capture until EOF;
//     counted by copies. The stdin copiers (stdinFor, attachTerminal) copy
//     the caller's stdin in and are not waited for: they end with their
//     input or with the pipe's reader.
//   - The janitor's starter (startJanitor): starts the cgroup's own
//     janitor in the background and sends its handle on janitor. When a
//     pool's janitor watches the cgroup instead, its release (watched)
//     waits for reaped on a goroutine of its own before it offers the
//     cgroup to the spares or removes it; the janitor process's waiter
//     (ownJanitor) reaps that process once it is let go.
//   - cgroups.Manager.Start's thread, which started the init in the
//     cgroup, waits for reaped before it ends.
//
// Fields written by one goroutine and read by another are handed over by
// a channel: usage is written before reaped is closed and read only after
// waited; job, the captures (stdout, stderr) and times are set before
// handout is closed, and the listener and the output copiers touch them
// only after it is. master is under masterMu, the command's pidfd under
// commandHandle.mu, an init's reaped flag under childInit.mu (held across
// the signal, so that none reaches a pid reused after the reaping). No lock
// is taken while another is held, and none across a channel operation.
//
// The channels, and who closes or sends on each (every send goes to a
// buffer of one and happens once, so neither the listener nor the reaper
// ever blocks on an owner that answered early or gave up):
//
//   - handout: closed once, by finish when the sandbox gets its command
//     and the caller's Job, by discard when it never does, or by
//     bootFailed; it releases the output copiers and the listener's
//     handling of the started command.
//   - ready: closed by the listener when the init waits for its command
//     (the root is built); a pool offers only such sandboxes.
//   - exitReport: the exit report, the moment it arrives.
//   - reports: all the init said, once its socket is closed.
//   - reaped: closed by the reaper once the init is reaped, or by
//     bootFailed when no init runs (then nobody else would); everything
//     that waits for the init's end selects on it.
//   - waited: the init's wait status, after reaped.
//   - janitor: the handle of the cgroup's janitor, taken once by
//     janitorStarted and kept in janitorState.
//   - finished: closed last, by finish or discard, once the sandbox is torn
//     down; a pool's filler builds the next sandbox only then, not beside
//     a run that needs the CPU.
//
// # Order of teardown
//
// finish waits for waited, or for exitReport alone when a janitor watches
// the cgroup (the init killed and reaped everything else before reporting;
// the janitor removes the cgroup once the init is gone: leftToJanitor).
// Then, in this order: reports (unless it answered early); copies, since
// EOF on every output pipe means every process of the sandbox is gone (the
// child's ends were closed here once the init had them) and the captures
// are complete; the cgroup's counters, read before the cgroup goes; then
// close: the commandHandle (its pidfd), the cgroup (destroyCgroup settles
// it, removes it or leaves it to the janitor, and lets the janitor go,
// which first waits for the janitor to have started, since it is opened
// from source), the control socket, the init's program, source, and the
// plan's files; and last finished. discard kills the init, waits for
// reaped, hangs up the socket (which ends an init that outlived its
// forker), hands out empty captures and tears down the same way.
//
// # Pools
//
// A Pool has size fillers; each builds one sandbox at a time (boot, then
// ready or reaped), offers it on the unbuffered pool.ready, and waits for
// its finished, for reaped (its init died: discard and build another), for
// maxAge (discard and rebuild), or for stop. The run that receives a
// sandbox from pool.ready owns it from then on; one that does not fit is
// discarded on a goroutine of its own. pool.mu guards the counters, the
// key of the last sandbox built and closed; spareCgroups has its own lock.
// Close closes stop (once), waits for the fillers, marks the pool closed
// so that no new supervisor is counted as the pool's, waits for active
// (every sandbox of the pool gone from the host: onDone), and only then
// removes the spare cgroups and ends the forker and the janitor the
// sandboxes used.
package supervisor
