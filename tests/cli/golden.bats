#!/usr/bin/env bats
# Golden values: the numbers predict and evaluate print for small models with
# fixed weights, against a forward pass computed independently with NumPy by
# tests/ref/make_golden.py (checked in under tests/ref/golden/: the models,
# their checkpoints, the inputs and the expected values), to 1e-6. They pin
# down what no other test checks: that predict's probabilities are the
# model's output (softmax of the logits with from_logits: true; [1 - p, p] for
# one sigmoid unit), that dropout is off and batch normalization uses its
# moving statistics in predict, evaluate and validation, and that accuracy
# over several sigmoid outputs counts outputs.

load helpers

setup() {
	common_setup
	G=$REPO/tests/ref/golden
	export OMP_NUM_THREADS=1
}

# golden WANT: $output, comma-separated lines, against the lines of WANT:
# as many lines and fields, the first two fields (index, class) equal, the
# others numbers within 1e-6.
golden() {
	awk -F, -v tol=1e-6 'NR == FNR { want[FNR] = $0; n = FNR; next }
		{
			got++
			k = split(want[FNR], w, ",")
			if (NF != k) { printf "line %d: %d fields, want %d: %s\n", FNR, NF, k, $0; bad++; next }
			for (i = 1; i <= NF; i++) {
				d = $i - w[i]
				if (i <= 2 ? $i != w[i] : d > tol || -d > tol) {
					printf "line %d, field %d: %s, want %s\n", FNR, i, $i, w[i]; bad++
				}
			}
		}
		END { if (got != n) { printf "%d lines, want %d\n", got, n; bad++ } exit bad > 0 }' "$1" - <<<"$output"
}

# predict_golden MODEL ARGS...: predict -q --all of tests/ref/golden/x.csv with MODEL's checkpoint.
predict_golden() {
	local m=$1
	shift
	"$DTRAIN" predict -q "$G/$m.yaml" --checkpoint "$G/$m.safetensors" --all "$@" "$G/x.csv"
}

@test "predict: a softmax model prints its outputs as the probabilities, dropout off (golden)" {
	run --separate-stderr predict_golden softmax
	status_is 0
	golden "$G/softmax.predict"
	# Without --all: the same class and probability.
	run --separate-stderr "$DTRAIN" predict -q "$G/softmax.yaml" --checkpoint "$G/softmax.safetensors" "$G/x.csv"
	status_is 0
	golden <(cut -d, -f1-3 "$G/softmax.predict")
}

@test "predict: from_logits: true prints the softmax of the logits; batch normalization uses its moving statistics (golden)" {
	run --separate-stderr predict_golden logits
	status_is 0
	golden "$G/logits.predict"
}

@test "predict: one sigmoid unit: p > 0.5 is class 1 with probability p, --all lists [1 - p, p] (golden)" {
	run --separate-stderr predict_golden sigmoid --header
	status_is 0
	[ "${lines[0]}" = "index,class,probability,p_no,p_yes" ]
	output=$(tail -n +2 <<<"$output")
	golden "$G/sigmoid.predict"
	# Both classes occur, so the rule was seen on either side of 0.5.
	[ "$(cut -d, -f2 <<<"$output" | sort -u | tr '\n' ' ')" = "no yes " ]
}

@test "predict --json: the same golden values" {
	for m in softmax logits sigmoid; do
		run --separate-stderr predict_golden "$m" --json
		status_is 0
		output=$(jq -r '[.index, .class, .probability] + .probabilities | map(tostring) | join(",")' <<<"$output")
		golden "$G/$m.predict"
	done
}

@test "predict: no randomness at inference: the same input twice, in other batches, gives the same lines" {
	cat "$G/x.csv" "$G/x.csv" >"$TMP/twice.csv"
	# 16 rows in batches of 5: the second copy of each row sits elsewhere in its batch.
	run --separate-stderr "$DTRAIN" predict -q "$G/softmax.yaml" --checkpoint "$G/softmax.safetensors" --all "$TMP/twice.csv"
	status_is 0
	[ "${#lines[@]}" -eq 32 ]
	diff <(head -16 <<<"$output" | cut -d, -f2-) <(tail -16 <<<"$output" | cut -d, -f2-)
	first=$output
	run --separate-stderr "$DTRAIN" predict -q "$G/softmax.yaml" --checkpoint "$G/softmax.safetensors" --all \
		--set data.batch_size=3 "$TMP/twice.csv"
	[ "$output" = "$first" ]
}

@test "evaluate: the golden loss and accuracy of every model (dropout off, moving statistics)" {
	for m in softmax logits sigmoid multi; do
		run --separate-stderr "$DTRAIN" evaluate "$G/$m.yaml" --checkpoint "$G/$m.safetensors" --json
		status_is 0
		read -r loss acc samples <"$G/$m.evaluate"
		jq -e --argjson loss "$loss" --argjson acc "$acc" --argjson n "$samples" \
			'(.loss - $loss | fabs) <= 1e-6 and (.accuracy - $acc | fabs) <= 1e-9 and .samples == $n' \
			<<<"$output" >/dev/null || {
			echo "$m: $output; want loss $loss, accuracy $acc, $samples samples" >&2
			false
		}
	done
}

@test "evaluate: several sigmoid outputs: accuracy is right outputs over samples x outputs" {
	run --separate-stderr "$DTRAIN" evaluate "$G/multi.yaml" --checkpoint "$G/multi.safetensors" --json
	status_is 0
	# 16 samples x 3 outputs, 33 right (more right outputs than samples: over 1 if divided by samples).
	jq -e '.accuracy == 33 / 48' <<<"$output" >/dev/null
}

# fit_golden MODEL ARGS...: one epoch of fit --json from MODEL's golden weights with a learning rate of 0.
fit_golden() {
	local m=$1
	shift
	"$DTRAIN" fit -q --json "$G/$m.yaml" --init-weights "$G/$m.safetensors" \
		--set 'compile.optimizer={sgd: {learning_rate: 0}}' --set checkpoint.enabled=false "$@"
}

@test "fit: validation runs without dropout (golden val_loss), training with it" {
	for m in softmax sigmoid; do
		run --separate-stderr fit_golden "$m" --set "data.validation={format: npy, x: $G/x.npy, y: $G/${m}_y.npy}"
		status_is 0
		read -r loss acc samples <"$G/$m.evaluate"
		events epoch | jq -e --argjson loss "$loss" --argjson acc "$acc" \
			'(.val_loss - $loss | fabs) <= 1e-6 and .val_accuracy == $acc and (.loss - $loss | fabs) > 1e-3' \
			>/dev/null || {
			echo "$m: $output; want val_loss $loss, val_accuracy $acc, and another training loss" >&2
			false
		}
	done
}

@test "fit: the training accuracy of several sigmoid outputs counts outputs (golden)" {
	run --separate-stderr fit_golden multi
	status_is 0
	read -r loss acc samples <"$G/multi.evaluate"
	events epoch | jq -e --argjson loss "$loss" '(.loss - $loss | fabs) <= 1e-6 and .accuracy == 33 / 48' >/dev/null
}
