#!/usr/bin/env bats
# Shell completion (cmd/completion/): the bash function offers subcommands,
# a subcommand's options, files and --set's config keys and names, all asked
# of dtrain ('dtrain complete ...', from the tables that parse the options and
# check the config); the zsh function loads; make install puts both in place
# and make uninstall takes away what install put.

load helpers

setup() {
	common_setup
	BASH_SCRIPT=$REPO/cmd/completion/dtrain.bash
}

# complete_bash 'LINE': runs _dtrain in a clean bash as if TAB was pressed at
# the end of LINE (COMP_WORDS split as bash splits them, at '=' too) and
# prints COMPREPLY, one a line.
complete_bash() {
	run bash --norc --noprofile -c '
		source "$1" || exit 1
		complete -p dtrain >/dev/null || exit 1
		COMP_LINE=$2
		COMP_POINT=${#COMP_LINE}
		COMP_WORDBREAKS=${COMP_WORDBREAKS:-$'"' \t\n\"'\''><=;|&(:'"'}
		line=${COMP_LINE//=/ = }
		read -ra COMP_WORDS <<<"$line"
		[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_dtrain
		printf "%s\n" "${COMPREPLY[@]}"' _ "$BASH_SCRIPT" "$1"
}

# complete_zsh 'LINE': types LINE and TAB into an interactive zsh (zpty) with
# compinit in a clean HOME and prints what _dtrain offered (compadd's
# matches), one a line.
complete_zsh() {
	local out=$TMP/zsh.out
	rm -f "$out"
	mkdir -p "$TMP/home"
	HOME=$TMP/home zsh -f -c '
		zmodload zsh/zpty || exit 1
		zpty z zsh -f -i
		zpty -w z "fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -d \$HOME/.zcompdump"
		zpty -w z "compadd () { local -a hits; builtin compadd -O hits \"\$@\"; print -rl -- \$hits >>$3; builtin compadd \"\$@\" }"
		zpty -w -n z "$2"$'"'\t'"'
		for i in {1..100}; do [[ -s $3 ]] && break; sleep 0.1; done
		sleep 0.3
		zpty -d z' _ "$REPO/cmd/completion" "$1" "$out"
	run cat "$out"
}

@test "dtrain complete: subcommands, options, keys and names from dtrain's own tables" {
	run "$DTRAIN" complete commands
	status_is 0
	[[ $output == *$'\n'"fit"$'\n'* || ${lines[0]} == fit ]]
	# The same list as 'dtrain help'.
	help=$("$DTRAIN" help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }')
	[ "$output" = "$help" ]
	run "$DTRAIN" complete options fit
	status_is 0
	[[ $output == *"--set"$'\t'"VALUE"* && $output == *"--resume"* && $output == *"--init-weights"$'\t'"VALUE"* ]]
	[[ $output != *"--report"* ]]
	run "$DTRAIN" complete options plot
	[[ $output == *"--size"$'\t'"VALUE"* ]]
	run "$DTRAIN" complete keys
	status_is 0
	for k in model.name compile.optimizer data.batch_size data.split.seed data.augment.random_crop.padding \
		fit.epochs checkpoint.save_best.monitor distribute.strategy data.train.format data.train.path \
		data.test.images; do
		printf '%s\n' "$output" | grep -qxF "$k" || { echo "no key $k"; false; }
	done
	# Nothing listed twice (csv's and npy's sample_weight is one key).
	[ -z "$(printf '%s\n' "$output" | sort | uniq -d)" ]
	run "$DTRAIN" complete values compile.optimizer
	[[ $output == *adam* && $output == *sgd* ]]
	run "$DTRAIN" complete values data.validation.format
	[[ $output == *csv* && $output == *png_folder* ]]
	run "$DTRAIN" complete values fit.epochs
	status_is 0
	[ -z "$output" ]
}

@test "each command's completed options are the ones its -h shows" {
	cmds=$("$DTRAIN" complete commands)
	[ -n "$cmds" ]
	for c in $cmds; do
		[ "$c" != help ] && [ "$c" != version ] || continue
		listed=$("$DTRAIN" complete options "$c" | cut -f1 | sort -u)
		shown=$("$DTRAIN" "$c" -h | grep -oE '(^|[][ ,|])--?[a-z][a-z-]*' | sed 's/^[][ ,|]//' | sort -u)
		[ -n "$listed" ]
		[ "$listed" = "$shown" ] || { echo "$c:"; diff <(echo "$listed") <(echo "$shown"); false; }
	done
}

@test "every key 'dtrain complete keys' lists is one --set takes" {
	# A key the config rejects would say "unknown key"; other errors (a
	# value of the wrong kind) are fine here. A data source's key needs a
	# format that takes it.
	run "$DTRAIN" complete keys
	keys=$output
	formats=$("$DTRAIN" complete values data.train.format)
	for k in $keys; do
		case $k in
		data.train.* | data.validation.* | data.test.*)
			ok=
			for f in $formats; do
				run --separate-stderr "$DTRAIN" config "$MODELS/blobs.yaml" \
					--set "${k%.*}={format: $f, ${k##*.}: ~}"
				[[ $stderr == *"unknown key"* ]] || ok=$f
			done
			[ -n "$ok" ] || { echo "$k: no format takes it"; false; } ;;
		*)
			run --separate-stderr "$DTRAIN" config "$MODELS/blobs.yaml" --set "$k=~"
			[[ $stderr != *"unknown key"* ]] || { echo "$k: $stderr"; false; } ;;
		esac
	done
}

@test "bash: the function is registered and offers the subcommands" {
	complete_bash "$DTRAIN "
	status_is 0
	[ "${lines[0]}" = fit ]
	[[ $output == *$'\n'evaluate$'\n'* && $output == *$'\n'version* ]]
	complete_bash "$DTRAIN ev"
	[ "$output" = evaluate ]
	complete_bash "$DTRAIN help pre"
	[ "$output" = predict ]
}

@test "bash: the options of fit, and only fit's" {
	complete_bash "$DTRAIN fit --"
	status_is 0
	for o in --set --json --quiet --init-weights --resume --help; do
		printf '%s\n' "$output" | grep -qxF -- "$o" || { echo "no $o"; false; }
	done
	[[ $output != *--report* && $output != *--checkpoint* ]]
	complete_bash "$DTRAIN evaluate --rep"
	[ "$output" = --report ]
}

@test "bash: file names for the model file and for an option's value" {
	mkdir -p "$TMP/w/runs"
	touch "$TMP/w/mlp.yaml" "$TMP/w/weights.safetensors"
	cd "$TMP/w"
	complete_bash "$DTRAIN fit ml"
	[ "$output" = mlp.yaml ]
	complete_bash "$DTRAIN fit mlp.yaml --init-weights we"
	[ "$output" = weights.safetensors ]
	complete_bash "$DTRAIN evaluate mlp.yaml --checkpoint ru"
	[ "$output" = runs ]
}

@test "bash: --set completes config keys with '=', then the names a key takes" {
	complete_bash "$DTRAIN fit m.yaml --set fit.ep"
	status_is 0
	[ "$output" = fit.epochs= ]
	complete_bash "$DTRAIN fit m.yaml --set checkpoint.save_best.mo"
	[ "$(printf '%s\n' "$output" | sort | tr '\n' ' ')" = "checkpoint.save_best.mode= checkpoint.save_best.monitor= " ]
	complete_bash "$DTRAIN fit m.yaml --set data.train.pa"
	[ "$output" = data.train.path= ]
	# bash splits at '=': the reply is the part after it.
	complete_bash "$DTRAIN fit m.yaml --set compile.optimizer=ada"
	[ "$(printf '%s\n' "$output" | sort | tr '\n' ' ')" = "adadelta adagrad adam adamax adamw " ]
	complete_bash "$DTRAIN fit m.yaml --set compile.loss=sparse_categorical_c"
	[ "$output" = sparse_categorical_crossentropy ]
	complete_bash "$DTRAIN fit m.yaml --set=fit.ep"
	[ "$output" = fit.epochs= ]
	complete_bash "$DTRAIN config m.yaml --set data.train.format=cs"
	[ "$output" = csv ]
}

@test "zsh: the function loads with compinit in a clean HOME" {
	command -v zsh >/dev/null || skip "zsh is not installed (make deps installs it)"
	mkdir -p "$TMP/home"
	HOME=$TMP/home run zsh -f -c '
		fpath=("$1" $fpath)
		autoload -Uz compinit && compinit -u -d "$HOME/.zcompdump" || exit 1
		[[ $_comps[dtrain] == _dtrain ]] || { print "dtrain is not bound to _dtrain: $_comps[dtrain]"; exit 1 }
		autoload +X _dtrain || exit 1
		print ok' _ "$REPO/cmd/completion"
	status_is 0
	[ "$output" = ok ]
}

@test "zsh: subcommands, fit's options, --set's keys and names" {
	command -v zsh >/dev/null || skip "zsh is not installed (make deps installs it)"
	complete_zsh "$DTRAIN ev"
	[ "$output" = evaluate ]
	complete_zsh "$DTRAIN fit --re"
	[ "$output" = --resume ]
	complete_zsh "$DTRAIN fit m.yaml --set fit.ep"
	[ "$output" = fit.epochs ]
	complete_zsh "$DTRAIN fit m.yaml --set compile.optimizer=adad"
	[ "$output" = adadelta ]
	complete_zsh "$DTRAIN fit m.yaml --set=compile.loss=hu"
	[ "$output" = huber ]
}

@test "make install puts the completions in place; make uninstall removes every file install put" {
	command -v make >/dev/null || skip "no make"
	unset MAKEFLAGS MAKELEVEL MFLAGS
	root=$TMP/root
	run make -s -C "$REPO" -o "$DTRAIN" install DESTDIR="$root" PREFIX=/usr BIN="$DTRAIN" CUDA=0
	status_is 0
	[ -f "$root/usr/share/bash-completion/completions/dtrain" ]
	[ -f "$root/usr/share/zsh/vendor-completions/_dtrain" ]
	[ -x "$root/usr/bin/dtrain" ]
	[ -f "$root/usr/share/man/man1/dtrain.1" ]
	run make -s -C "$REPO" uninstall DESTDIR="$root" PREFIX=/usr CUDA=0
	status_is 0
	run find "$root" -type f
	[ -z "$output" ]
	# And one installed with the CUDA backend: its folder goes too.
	mkdir -p "$root/usr/lib/dtrain" && touch "$root/usr/lib/dtrain/libdtrain_cuda.so"
	run make -s -C "$REPO" uninstall DESTDIR="$root" PREFIX=/usr CUDA=0
	[ ! -e "$root/usr/lib/dtrain" ]
}
