#!/usr/bin/env bats
# The command line itself: version, help, usage errors and their exit statuses
# (0 ok, 1 runtime failure, 2 usage or config error).

load helpers

setup() {
	common_setup
}

@test "--version prints 'dtrain X.Y.Z' on stdout" {
	run --separate-stderr "$DTRAIN" --version
	status_is 0
	[[ $output =~ ^dtrain\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	[ -z "$stderr" ]
}

@test "-V and 'version' print the same as --version" {
	run "$DTRAIN" --version
	local want=$output
	run "$DTRAIN" -V
	status_is 0
	[ "$output" = "$want" ]
	run "$DTRAIN" version
	status_is 0
	[ "$output" = "$want" ]
}

@test "help lists every subcommand on stdout" {
	run --separate-stderr "$DTRAIN" help
	status_is 0
	[[ ${lines[0]} == "usage: dtrain COMMAND"* ]]
	for c in fit evaluate summary devices help version; do
		[[ $output == *$'\n'"  $c "* ]] || {
			echo "'$c' is missing from 'dtrain help'" >&2
			return 1
		}
	done
	[ -z "$stderr" ]
}

@test "--help and -h print the same list as help" {
	run "$DTRAIN" help
	local want=$output
	run "$DTRAIN" --help
	status_is 0
	[ "$output" = "$want" ]
	run "$DTRAIN" -h
	status_is 0
	[ "$output" = "$want" ]
}

@test "no arguments: usage on stderr, exit 2" {
	run --separate-stderr "$DTRAIN"
	status_is 2
	[ -z "$output" ]
	[[ $stderr == "usage: dtrain COMMAND"* ]]
}

@test "help fit prints fit's options" {
	run --separate-stderr "$DTRAIN" help fit
	status_is 0
	[[ ${lines[0]} == "usage: dtrain fit "* ]]
	[[ $output == *--set* && $output == *--json* && $output == *--quiet* && $output == *--init-weights* ]]
	[ -z "$stderr" ]
}

@test "help fit is the same text as fit -h and fit --help" {
	run "$DTRAIN" help fit
	local want=$output
	run "$DTRAIN" fit -h
	status_is 0
	[ "$output" = "$want" ]
	run "$DTRAIN" fit --help
	status_is 0
	[ "$output" = "$want" ]
}

@test "fit -h exits 0 with usage even when a model file follows" {
	run "$DTRAIN" fit -h "$MODELS/blobs.yaml"
	status_is 0
	[[ ${lines[0]} == "usage: dtrain fit "* ]]
	[[ $output != *Epoch* ]]
}

@test "evaluate -h: usage with --checkpoint, --set, --json" {
	run --separate-stderr "$DTRAIN" evaluate -h
	status_is 0
	[[ ${lines[0]} == "usage: dtrain evaluate "* ]]
	[[ $output == *--checkpoint* && $output == *--set* && $output == *--json* ]]
	[ -z "$stderr" ]
}

@test "summary -h: usage with --set" {
	run --separate-stderr "$DTRAIN" summary -h
	status_is 0
	[[ ${lines[0]} == "usage: dtrain summary "* ]]
	[[ $output == *--set* ]]
	[ -z "$stderr" ]
}

@test "devices -h: usage with --json" {
	run --separate-stderr "$DTRAIN" devices -h
	status_is 0
	[[ ${lines[0]} == "usage: dtrain devices"* ]]
	[[ $output == *--json* ]]
	[ -z "$stderr" ]
}

@test "help COMMAND works for every subcommand that has options" {
	for c in fit evaluate summary devices; do
		run "$DTRAIN" help "$c"
		status_is 0
		[[ ${lines[0]} == "usage: dtrain $c"* ]]
	done
}

@test "unknown command: exit 2, names it and points to 'dtrain help'" {
	run --separate-stderr "$DTRAIN" fitt
	status_is 2
	[ -z "$output" ]
	[[ $stderr == *"dtrain: error: unknown command 'fitt'"* ]]
	[[ $stderr == *"dtrain help"* ]]
}

@test "help of an unknown command: exit 2" {
	run --separate-stderr "$DTRAIN" help fitt
	status_is 2
	[[ $stderr == *"unknown command 'fitt'"* ]]
}

@test "unknown long option: exit 2, names it, prints the usage" {
	run --separate-stderr "$DTRAIN" fit --bogus "$MODELS/blobs.yaml"
	status_is 2
	[[ $stderr == *"dtrain: error: unknown option '--bogus'"* ]]
	[[ $stderr == *"usage: dtrain fit "* ]]
	[[ $stderr != *Epoch* ]]
}

@test "unknown short option: exit 2, names it" {
	run --separate-stderr "$DTRAIN" fit -z "$MODELS/blobs.yaml"
	status_is 2
	[[ $stderr == *"unknown option '-z'"* ]]
}

@test "an option another subcommand has is unknown here: exit 2" {
	run --separate-stderr "$DTRAIN" summary --json "$MODELS/blobs.yaml"
	status_is 2
	[[ $stderr == *"unknown option '--json'"* ]]
	run --separate-stderr "$DTRAIN" devices --set a=b
	status_is 2
	[[ $stderr == *"unknown option '--set'"* ]]
}

@test "an option that needs a value and has none: exit 2, names the option as written" {
	# The message must name '--set', not getopt's internal '-s'.
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set
	status_is 2
	[[ $stderr == *"'--set'"* ]]
	[[ $stderr != *"'-s'"* ]]
}

@test "missing model file argument: exit 2 for fit, evaluate and summary" {
	for c in fit evaluate summary; do
		run --separate-stderr "$DTRAIN" "$c"
		status_is 2
		[[ $stderr == *"missing the model file"* ]]
		[[ $stderr == *"usage: dtrain $c "* ]]
	done
}

@test "a second model file is an unexpected argument: exit 2" {
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" "$MODELS/blobs.yaml"
	status_is 2
	[[ $stderr == *"unexpected argument"* ]]
}

@test "devices takes no argument: exit 2" {
	run --separate-stderr "$DTRAIN" devices extra
	status_is 2
	[[ $stderr == *"unexpected argument 'extra'"* ]]
}

@test "nonexistent model file: exit 2 with 'cannot open' and the path" {
	# A model file that is not there is a usage error (2), like a bad config.
	for c in fit evaluate summary; do
		run --separate-stderr "$DTRAIN" "$c" "$TMP/no-such-model.yaml"
		status_is 2
		[[ $stderr == *"cannot open '$TMP/no-such-model.yaml'"* ]]
		[[ $stderr == *"No such file or directory"* ]]
	done
}

@test "a model file that is a directory: an error naming it, not a crash" {
	run --separate-stderr "$DTRAIN" summary "$TMP"
	not_crashed
	[ "$status" -ne 0 ]
	[[ $stderr == *"'$TMP'"* ]]
}
