# bash completion for dtrain: subcommands, their options, files, and --set's
# config keys and names. The lists come from dtrain itself ('dtrain complete
# commands', 'options COMMAND', 'keys', 'values KEY'), so a key or option
# added to dtrain completes without editing this file. Installed by
# 'make install' as share/bash-completion/completions/dtrain.

# --set's argument: "KEY" completes to "KEY=", "KEY=NA" to the names KEY takes.
_dtrain_set()
{
	local dtrain=$1 cur=$2
	if [[ $cur == *=* ]]; then
		local key=${cur%%=*}
		COMPREPLY=($(compgen -P "$key=" -W "$("$dtrain" complete values "$key" 2>/dev/null)" -- "${cur#*=}"))
	else
		COMPREPLY=($(compgen -S = -W "$("$dtrain" complete keys 2>/dev/null)" -- "$cur"))
		compopt -o nospace 2>/dev/null
	fi
}

_dtrain()
{
	# The words up to the cursor, split at blanks only: bash splits at '=' too
	# (COMP_WORDBREAKS), and --set's KEY=VALUE is easier to read whole.
	local line=${COMP_LINE:0:COMP_POINT} cur prev cmd dtrain opts
	local -a words
	read -ra words <<<"$line"
	[[ -z $line || $line == *[[:blank:]] ]] && words+=("")
	cur=${words[${#words[@]} - 1]}
	prev=${words[${#words[@]} - 2]}
	dtrain=${words[0]/#\~/$HOME}
	command -v "$dtrain" >/dev/null 2>&1 || dtrain=dtrain
	COMPREPLY=()

	if ((${#words[@]} == 2)); then
		COMPREPLY=($(compgen -W "$("$dtrain" complete commands 2>/dev/null)" -- "$cur"))
		return
	fi
	cmd=${words[1]}
	case $cmd in
	help)
		((${#words[@]} == 3)) && COMPREPLY=($(compgen -W "$("$dtrain" complete commands 2>/dev/null)" -- "$cur"))
		return
		;;
	version) return ;;
	esac
	opts=$("$dtrain" complete options "$cmd" 2>/dev/null)

	if [[ $prev == --set ]]; then
		_dtrain_set "$dtrain" "$cur"
	elif [[ $cur == --set=* ]]; then
		_dtrain_set "$dtrain" "${cur#--set=}"
		COMPREPLY=("${COMPREPLY[@]/#/--set=}")
	elif [[ -n $prev && $(printf '%s\n' "$opts" | grep -Fx -- "$prev	VALUE") ]]; then
		COMPREPLY=($(compgen -f -- "$cur"))
		compopt -o filenames 2>/dev/null
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(printf '%s\n' "$opts" | cut -f1)" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
		compopt -o filenames 2>/dev/null
	fi

	# bash replaces only the part of the word after its last '=' (a word
	# break): hand it that part.
	if [[ $cur == *=* && $COMP_WORDBREAKS == *=* ]]; then
		local head=${cur%=*}=
		COMPREPLY=("${COMPREPLY[@]#"$head"}")
	fi
}

complete -F _dtrain dtrain
