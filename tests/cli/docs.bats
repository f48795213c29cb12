#!/usr/bin/env bats
# The documentation keeps up with the code: the man pages render without
# warnings, every subcommand has its page and every option its entry, every
# config key and name the code reads is in dtrain.yaml(5), and README's quick
# start is the two commands it promises. The lists come from the code, so a
# key, layer or subcommand added without its documentation fails here.
#
# Environment: DTRAIN, the binary (default: build/dtrain of this tree).

setup() {
	ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	DTRAIN=${DTRAIN:-$ROOT/build/dtrain}
	YAML5=$ROOT/man/dtrain.yaml.5
}

# man_text FILE: the page's source with font and character escapes removed.
man_text() {
	sed -E 's/\\f[BIRP]//g; s/\\f\[[^]]*\]//g; s/\\-/-/g; s/\\&//g; s/\\\(aq/'"'"'/g; s/\\\(dq/"/g' "$1"
}

# man_terms FILE: the words the page defines, one per line: the first word of
# every .TP tag and of every .SS heading.
man_terms() {
	man_text "$1" | awk '
		tag { tag = 0; sub(/^\.[A-Z]+ +/, ""); gsub(/"/, ""); print $1; next }
		/^\.TP/ { tag = 1; next }
		/^\.SS / { sub(/^\.SS +/, ""); gsub(/"/, ""); print $1 }
	' | sort -u
}

# code_strings REGEX FILE...: the quoted strings inside every `REGEX = { ... }`
# initializer of the files (REGEX is a Perl pattern for the declaration).
code_strings() {
	local re=$1
	shift
	perl -0777 -ne 'while (/'"$re"'\s*=\s*\{(?<body>.*?)\}/gs) { my $l = $+{body}; print "$1\n" while $l =~ /"([^"]+)"/g }' "$@" |
		sort -u
}

# The keys the code reads: the allowed-key lists given to dt_cfg_check_keys()
# and dt_layer_check_keys() (static, or shared with `dtrain complete`), plus the "name" every layer takes.
config_keys() {
	(
		cd "$ROOT" &&
			code_strings '(?:static )?const char \*const (\w*keys|sections)\[\]' \
				$(find core -name '*.c') layers/*.c data/*.c strategies/*.c &&
			perl -ne 'print "$1\n" while /keys\[n\+\+\] = "(\w+)"/g' $(find core -name '*.c')
	) | sort -u
}

# The names a config value may take: activations, losses, optimizers,
# metrics, synthetic kinds, strategies, schedules, callbacks and their modes.
config_names() {
	(
		cd "$ROOT" &&
			code_strings 'const char \*const dt_\w+_names\[\]' $(find core -name '*.c') strategies/*.c &&
			code_strings 'static const char \*const (metrics|kinds|names|modes|monitors)\[\]' \
				$(find core -name '*.c') data/*.c strategies/*.c &&
			code_strings 'static const char \*const \w+_names\[\]' $(find core -name '*.c')
	) | sort -u
}

# type_names TABLE_FILE DIR: the `.name` of every type listed in a table
# file such as layers/layers.c, looked up in the type's definition in DIR.
type_names() {
	local sym
	for sym in $(perl -ne 'print "$1\n" while /&(dt_\w+)/g' "$ROOT/$1"); do
		perl -0777 -ne 'print "$1\n" if /const struct dt_\w+_type '"$sym"' = \{.*?\.name = "([^"]+)"/s' "$ROOT/$2"/*.c
	done
}

# missing_from LIST_CMD...: prints the lines of stdin absent from the list.
missing_from() {
	grep -vxF -f <("$@")
}

@test "every man page renders without groff warnings" {
	command -v groff >/dev/null || skip "groff is not installed (Debian: groff-base)"
	local f pages=0 bad=""
	for f in "$ROOT"/man/*.[1-9]; do
		pages=$((pages + 1))
		out=$(groff -man -Tutf8 -ww -z "$f" 2>&1) || bad="$bad $(basename "$f")"
		if [ -n "$out" ]; then
			echo "$(basename "$f"): $out"
			bad="$bad $(basename "$f")"
		fi
	done
	[ "$pages" -ge 6 ]
	[ -z "$bad" ] || { echo "warnings in:$bad"; false; }
}

@test "every subcommand of 'dtrain help' has its man page, listed in dtrain(1)" {
	run "$DTRAIN" help
	[ "$status" -eq 0 ]
	cmds=$(printf '%s\n' "$output" | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }')
	[ -n "$cmds" ]
	for c in $cmds; do
		case $c in help | version) continue ;; esac
		[ -f "$ROOT/man/dtrain-$c.1" ] || { echo "no man/dtrain-$c.1"; false; }
	done
	for c in $cmds; do
		man_terms "$ROOT/man/dtrain.1" | grep -qxF "$c" || { echo "dtrain.1 does not list '$c'"; false; }
	done
}

@test "every subcommand man page is for a subcommand dtrain has" {
	run "$DTRAIN" help
	for f in "$ROOT"/man/dtrain-*.1; do
		c=$(basename "$f" .1)
		c=${c#dtrain-}
		printf '%s\n' "$output" | grep -qE "^  $c " || { echo "$(basename "$f") documents no subcommand"; false; }
	done
}

@test "every option a subcommand's -h lists is under OPTIONS in its man page" {
	for f in "$ROOT"/man/dtrain-*.1; do
		c=$(basename "$f" .1)
		c=${c#dtrain-}
		run "$DTRAIN" "$c" -h
		[ "$status" -eq 0 ]
		opts=$(printf '%s\n' "$output" | grep -oE '(^|[ ,])--?[a-z][a-z-]*' | tr -d ' ,' | sort -u)
		[ -n "$opts" ]
		# The OPTIONS section alone: an option named only in SYNOPSIS or an example is not described.
		section=$(man_text "$f" | awk '/^\.SH/ { on = /^\.SH "?OPTIONS/ } on')
		[ -n "$section" ] || { echo "$(basename "$f") has no OPTIONS section"; false; }
		for o in $opts; do
			grep -qwF -- "$o" <<<"$section" || { echo "$(basename "$f") lacks $o under OPTIONS"; false; }
		done
	done
}

@test "every config key the code reads is documented in dtrain.yaml(5)" {
	keys=$(config_keys)
	# The extraction itself works: a few keys of each kind are found.
	for k in layers batch_size units rate beta_1 images noise device name; do
		printf '%s\n' "$keys" | grep -qxF "$k" || { echo "key extraction lost '$k'"; false; }
	done
	missing=$(printf '%s\n' "$keys" | missing_from man_terms "$YAML5" || true)
	[ -z "$missing" ] || { echo "undocumented keys:" $missing; false; }
}

@test "every layer type of layers/layers.c has its section in dtrain.yaml(5)" {
	types=$(type_names layers/layers.c layers)
	[ "$(printf '%s\n' "$types" | wc -l)" -eq "$(grep -c '&dt_' "$ROOT/layers/layers.c")" ]
	missing=$(printf '%s\n' "$types" | missing_from man_terms "$YAML5" || true)
	[ -z "$missing" ] || { echo "undocumented layers:" $missing; false; }
}

@test "every data format of data/sources.c has its section in dtrain.yaml(5)" {
	formats=$(type_names data/sources.c data)
	[ "$(printf '%s\n' "$formats" | wc -l)" -eq "$(grep -c '&dt_' "$ROOT/data/sources.c")" ]
	missing=$(printf '%s\n' "$formats" | missing_from man_terms "$YAML5" || true)
	[ -z "$missing" ] || { echo "undocumented formats:" $missing; false; }
}

@test "every name a config value may take is in dtrain.yaml(5)" {
	names=$(config_names)
	for n in relu adam mean_squared_error accuracy spirals one_device; do
		printf '%s\n' "$names" | grep -qxF "$n" || { echo "name extraction lost '$n'"; false; }
	done
	text=$(man_text "$YAML5")
	for n in $names; do
		printf '%s\n' "$text" | grep -qwF -- "$n" || { echo "dtrain.yaml.5 never names '$n'"; false; }
	done
}

@test "the man pages carry the version of the binary" {
	run "$DTRAIN" --version
	[ "$status" -eq 0 ]
	version=${output#dtrain }
	for f in "$ROOT"/man/*.[1-9]; do
		grep -qF "\"dtrain $version\"" "$f" || { echo "$(basename "$f") is not for dtrain $version"; false; }
	done
}

@test "README's quick start is exactly 'make demo' and 'make check'" {
	cmds=$(awk '
		/^## / { on = tolower($0) ~ /^## quick start/; next }
		on && /^```/ { code = !code; next }
		on && code && NF && $1 != "#" { sub(/^\$ /, ""); print }
	' "$ROOT/README.md")
	[ "$cmds" = "$(printf 'make demo\nmake check')" ] || { echo "quick start commands:"; echo "$cmds"; false; }
}
