#!/bin/sh
# jail-ci-step.sh [JAIL RUN OPTIONS...] -- COMMAND [ARGS...]
#
# Runs one step of a CI job (a test suite, a build) in a jail sandbox, with
# the checkout as /workspace, read-write, and the step's working directory.
# The step sees the host's tree read-only (or an image's, with --image),
# has no network unless allowed (--net allow=HOST,...), and is held to
# limits; what it writes in the checkout (reports, build output) stays there
# for the job's next steps, owned as the checkout is. Its exit status is
# the step's: the command's own, 124 when it ran out of time, 125 when jail
# could not run it (with jail's one-line reason).
#
#   examples/ci-step/jail-ci-step.sh -- make test
#   examples/ci-step/jail-ci-step.sh --image python:3.11-slim --net allow=pypi.org,**.pythonhosted.org -- \
#       sh -c 'pip install -r requirements.txt && python -m pytest'
#
# Environment: JAIL (the jail binary, default: jail on PATH),
# JAIL_CI_WORKSPACE (the checkout, default: the working directory),
# JAIL_CI_MEMORY (4G), JAIL_CI_CPUS (2), JAIL_CI_TIMEOUT (30m), and
# JAIL_CI_OWNER (uid:gid, default 1999990000:1999990000; see below),
# JAIL_CI_WRITABLE_GIT (1: the step may change the checkout's .git, which
# is otherwise read-only to it; see below).
#
# As root, jail refuses to let a sandbox write in a directory of host root's
# (what the sandbox wrote there would be root's). A CI runner's checkout as
# root is root's: for the step, it is given to JAIL_CI_OWNER, an
# unprivileged owner, and given back to its owner after the step, whatever
# the step did. The default is an id no account has (not nobody's, 65534,
# whose daemons could otherwise write the checkout meanwhile), below the
# ids jail gives root's sandboxes and their namespaces' owner. Rootless,
# the sandbox writes as the caller: nothing changes hands.
set -eu

jail=${JAIL:-jail}
checkout=${JAIL_CI_WORKSPACE:-$PWD}
if ! workspace=$(cd "$checkout" 2>/dev/null && pwd -P); then
	echo "jail-ci-step: $checkout: no such directory (the checkout: JAIL_CI_WORKSPACE, or the working directory)" >&2
	exit 125
fi

opts=
for arg; do
	[ "$arg" = "--" ] && opts=found && break
done
if [ "$opts" != found ]; then
	echo "usage: jail-ci-step.sh [JAIL RUN OPTIONS...] -- COMMAND [ARGS...]" >&2
	exit 125
fi

# The checkout's .git is the step's to read, never to change: git on the
# host (the job's later steps, the next job's checkout on a runner that
# keeps its workspace) runs what .git/config and .git/hooks name (an
# fsmonitor, a post-checkout hook), outside any sandbox. It is shown
# read-only, and git in the step is told to trust it, as shown (its owner
# is not the sandbox's user). JAIL_CI_WRITABLE_GIT=1 lets the step write it.
if [ "${JAIL_CI_WRITABLE_GIT:-}" != 1 ] && { [ -d "$workspace/.git" ] || [ -L "$workspace/.git" ]; }; then
	case $workspace in
	*:*)
		echo "jail-ci-step: $workspace has a ':' and its .git cannot be mounted read-only; set JAIL_CI_WRITABLE_GIT=1 to let the step change it" >&2
		exit 125 ;;
	esac
	if [ -L "$workspace/.git" ]; then
		echo "jail-ci-step: $workspace/.git is a symbolic link; set JAIL_CI_WRITABLE_GIT=1 to let the step change what it names" >&2
		exit 125
	fi
	set -- --mount "$workspace/.git:/workspace/.git:ro" \
		--env GIT_CONFIG_COUNT=1 --env GIT_CONFIG_KEY_0=safe.directory --env GIT_CONFIG_VALUE_0=/workspace "$@"
fi

given_back=
if [ "$(id -u)" = 0 ] && [ "$(stat -c %u "$workspace")" = 0 ]; then
	owner=$(stat -c %u:%g "$workspace")
	step_owner=${JAIL_CI_OWNER:-1999990000:1999990000}
	case $step_owner in
	0:* | *:0 | root:* | *:root)
		echo "jail-ci-step: JAIL_CI_OWNER=$step_owner: an unprivileged uid:gid, not root's" >&2
		exit 125 ;;
	esac
	echo "jail-ci-step: $workspace is root's: it is $step_owner's for the step, then $owner's again" >&2
	given_back=$owner
	# Given back whatever happens, an interrupted step and a lending that
	# failed half-way included; a give-back that fails is the step's
	# failure.
	give_back() {
		if ! chown -R -h "$given_back" "$workspace"; then
			echo "jail-ci-step: $workspace could not all be given back to $given_back" >&2
			exit 125
		fi
	}
	trap give_back EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	if ! chown -R -h "$step_owner" "$workspace"; then
		echo "jail-ci-step: $workspace could not all be lent to $step_owner" >&2
		exit 125
	fi
fi

status=0
"$jail" run \
	--workspace "$workspace" \
	--memory "${JAIL_CI_MEMORY:-4G}" \
	--cpus "${JAIL_CI_CPUS:-2}" \
	--timeout "${JAIL_CI_TIMEOUT:-30m}" \
	--env CI=true \
	"$@" || status=$?

case $status in
0) ;;
124) echo "jail-ci-step: the step ran out of time (${JAIL_CI_TIMEOUT:-30m})" >&2 ;;
125) echo "jail-ci-step: jail could not run the step (its reason is above)" >&2 ;;
137) echo "jail-ci-step: the step was killed (SIGKILL: out of memory at ${JAIL_CI_MEMORY:-4G}?)" >&2 ;;
*) echo "jail-ci-step: the step failed with exit status $status" >&2 ;;
esac
exit "$status"
