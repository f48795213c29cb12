#!/usr/bin/env bats
# PNG folders end to end: models/fashion_png.py writes a small PNG-folder
# copy of Fashion-MNIST, models/fashion_png.yaml trains on it; a corrupt PNG
# stops the run with exit 1 and an error that names the file.

load helpers

setup() {
	common_setup
	command -v python3 >/dev/null || skip "python3 is not installed (Debian: python3)"
	[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
		skip "Fashion-MNIST is not installed (Debian: dataset-fashion-mnist)"
	cd "$TMP"
	python3 "$REPO/models/fashion_png.py" --out fp --limit 150 >/dev/null
}

# fit_png [ARGS...]: models/fashion_png.yaml on the small copy, 2 epochs.
fit_png() {
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/fashion_png.yaml" \
		--set data.train.directory="$TMP/fp/train" --set data.validation.directory="$TMP/fp/test" \
		--set data.test.directory="$TMP/fp/test" --set fit.epochs=2 --set checkpoint.dir="$TMP/ck" "$@"
}

@test "the script writes one folder per Fashion-MNIST class of 28x28 PNGs" {
	[ "$(ls fp/train | tr '\n' ' ')" = "Ankle_boot Bag Coat Dress Pullover Sandal Shirt Sneaker T-shirt_top Trouser " ]
	[ "$(find fp/train -name '*.png' | wc -l)" -eq 150 ]
	[ "$(find fp/test -name '*.png' | wc -l)" -eq 150 ]
	# The first training image of Fashion-MNIST is an ankle boot.
	[ -f fp/train/Ankle_boot/00000.png ]
	head -c 8 fp/train/Ankle_boot/00000.png | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'
}

@test "models/fashion_png.yaml trains on a PNG folder and learns" {
	fit_png --json
	status_is 0
	[ "$(events epoch | wc -l)" -eq 2 ]
	[ "$(events test | jq -r .samples)" -eq 150 ]
	# Better than chance (10%) on the held-out images after two epochs.
	acc=$(events test | jq -r .accuracy)
	jq -en "$acc > 0.2" >/dev/null || { echo "accuracy $acc"; false; }
	[ -f "$TMP/ck/latest.safetensors" ]
}

@test "a truncated PNG: exit 1, the error names the file and its record" {
	f=$(find fp/train/Bag -name '*.png' | sort | head -1)
	head -c 60 "$f" >cut.png && mv cut.png "$f"
	fit_png
	not_crashed
	status_is 1
	stderr_has "dtrain: error: cannot decode '$TMP/$f'" "record " "ends early"
}

@test "garbage named .png and a missing directory: exit 1 naming the path" {
	f=$(find fp/train/Coat -name '*.png' | sort | tail -1)
	echo "not an image" >"$f"
	fit_png
	not_crashed
	status_is 1
	stderr_has "'$TMP/$f'" "not a PNG file"
	fit_png --set data.train.directory="$TMP/nowhere"
	not_crashed
	status_is 1
	stderr_has "'$TMP/nowhere'" "No such file"
}

@test "on_error: skip names each skipped image's path; other image files are counted in the right number" {
	f=$(find fp/train/Bag -name '*.png' | sort | head -1)
	echo "not an image" >"$f"
	touch fp/train/Coat/x.jpg
	fit_png --set fit.epochs=1 --set data.on_error=skip
	status_is 0
	stderr_has "skipped 1 unreadable record in epoch 1 of '$TMP/fp/train': record " " ('$TMP/$f')"
	stderr_has "'$TMP/fp/train' holds 1 .jpg, .jpeg, .bmp or .gif file: it is ignored"
	touch fp/train/Coat/y.gif
	fit_png --set fit.epochs=1 --set data.on_error=skip
	stderr_has "holds 2 .jpg, .jpeg, .bmp or .gif files: they are ignored"
}

@test "an empty class folder is an error naming it" {
	mkdir fp/train/Zebra
	fit_png
	not_crashed
	status_is 1
	stderr_has "class folder '$TMP/fp/train/Zebra' holds no .png files"
}

# predict_png [ARGS...]: dtrain predict with the model fit_png wrote.
predict_png() {
	run --separate-stderr "$DTRAIN" predict "$REPO/models/fashion_png.yaml" --checkpoint "$TMP/ck/latest.safetensors" \
		--set data.train.directory="$TMP/fp/train" "$@"
}

@test "predict a piped list of PNG paths: one line per path naming it, valid classes, JSON with a path" {
	fit_png --set fit.epochs=1
	status_is 0
	export OMP_NUM_THREADS=1
	classes=" $(ls fp/train | tr '\n' ' ')"
	# find | dtrain predict -: index,path,class,probability, in the order of the list.
	run --separate-stderr bash -c "find fp/test -name '*.png' | sort | '$DTRAIN' predict '$REPO/models/fashion_png.yaml' \
		--checkpoint '$TMP/ck/latest.safetensors' --set data.train.directory='$TMP/fp/train' --header -"
	status_is 0
	[ "${#lines[@]}" -eq 151 ]
	[ "${lines[0]}" = "index,path,class,probability" ]
	find fp/test -name '*.png' | sort >want
	paste -d' ' <(printf '%s\n' "${lines[@]:1}") want >got
	while read -r line path; do
		IFS=, read -r i p c pr <<<"$line"
		[ "$p" = "$path" ] || { echo "line '$line' for '$path'"; false; }
		[[ $classes == *" $c "* ]] || { echo "class '$c' in '$line'"; false; }
		jq -en "$pr > 0 and $pr <= 1" >/dev/null || { echo "probability in '$line'"; false; }
	done <got
	[ "$(printf '%s\n' "${lines[@]:1}" | cut -d, -f1 | tr '\n' ' ')" = "$(seq -s ' ' 0 149) " ]
	# The model learned something: better than chance on the held-out images.
	right=$(printf '%s\n' "${lines[@]:1}" | awk -F, '{ split($2, d, "/"); if (d[3] == $3) n++ } END { print n + 0 }')
	[ "$right" -gt 30 ] || { echo "right: $right"; false; }
	# JSON: a path field; blank lines are ignored; a list file read by name (.lst).
	{ echo fp/test/Bag/$(ls fp/test/Bag | head -1); echo; echo '   '; echo "$TMP/fp/train/Coat/$(ls fp/train/Coat | head -1)"; } >imgs.lst
	predict_png --json --all imgs.lst
	status_is 0
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .path <<<"${lines[0]}")" = "fp/test/Bag/$(ls fp/test/Bag | head -1)" ]
	[ "$(jq -r .path <<<"${lines[1]}")" = "$TMP/fp/train/Coat/$(ls fp/train/Coat | head -1)" ]
	[ "$(jq -r '.index' <<<"${lines[1]}")" -eq 1 ]
	for l in "${lines[@]}"; do
		c=$(jq -r .class <<<"$l")
		[[ $classes == *" $c "* ]]
		jq -e '(.probabilities | length) == 10 and ((.probabilities | add) - 1 | fabs) < 1e-4' <<<"$l" >/dev/null
	done
	# A .txt list is PNG paths for a model that trains on a png_folder; --format png says so for any name.
	cp imgs.lst imgs.txt
	cp imgs.lst imgs.dat
	predict_png imgs.txt
	status_is 0
	[[ ${lines[0]} == 0,fp/test/Bag/*.png,* ]]
	predict_png --format png imgs.dat
	status_is 0
	[ "${#lines[@]}" -eq 2 ]
	# A path ending in .png (any case) is one image, with the line a list of it gives.
	cp "fp/test/Bag/$(ls fp/test/Bag | head -1)" one.PNG
	echo one.PNG >one.lst
	predict_png one.lst
	status_is 0
	want=${lines[0]}
	[[ $want == 0,one.PNG,* ]]
	predict_png one.PNG
	status_is 0
	[ "${#lines[@]}" -eq 1 ]
	[ "${lines[0]}" = "$want" ]
	# An image read as a list of paths is refused without printing its bytes.
	cp one.PNG one.dat
	predict_png --format png one.dat
	not_crashed
	status_is 1
	stderr_has "'one.dat' is not a text list of PNG paths: it looks binary, a PNG image"
	[[ $stderr != *$'\x89'* ]]
	# A JPEG photo (what Keras would read) is refused by its name, not read as a list of paths.
	printf '\xff\xd8\xff\xe0' >cat.jpg
	predict_png cat.jpg
	not_crashed
	status_is 1
	stderr_has "cannot read 'cat.jpg': dtrain reads PNG images only, not .jpg (convert it to .png)"
	# A model input that is not an image is refused.
	predict_png --set 'model.input_shape=[784]' imgs.lst
	not_crashed
	status_is 2
	stderr_has "(height, width, channels)"
}

@test "predict PNG paths: a missing or corrupt path is exit 1 naming it and its line; on_error: skip skips it" {
	fit_png --set fit.epochs=1
	status_is 0
	export OMP_NUM_THREADS=1
	good=fp/test/Bag/$(ls fp/test/Bag | head -1)
	echo "not an image" >bad.png
	printf '%s\n\n%s\n%s\n' "$good" missing.png "$good" >missing.lst
	predict_png missing.lst
	not_crashed
	status_is 1
	stderr_has "cannot decode 'missing.png' (line 3 of 'missing.lst')" "No such file"
	printf '%s\nbad.png\n' "$good" | {
		run --separate-stderr "$DTRAIN" predict "$REPO/models/fashion_png.yaml" --checkpoint "$TMP/ck/latest.safetensors" \
			--set data.train.directory="$TMP/fp/train" -
		not_crashed
		status_is 1
		stderr_has "'bad.png' (line 2 of '<stdin>')" "not a PNG file"
	}
	# With data.on_error: skip, a warning names each and the other lines are predicted.
	printf '%s\nbad.png\n' "$good" >>missing.lst
	predict_png --set data.on_error=skip missing.lst
	status_is 0
	[ "${#lines[@]}" -eq 3 ]
	stderr_has "warning: skipping 'missing.png' (line 3 of 'missing.lst')" "warning: skipping 'bad.png' (line 6"
	[[ ${lines[0]} == "0,$good,"* && ${lines[2]} == "2,$good,"* ]]
}

@test "predict MODEL.yaml without input_shape decodes at the checkpoint's size, not the training folder's first image's" {
	# A fully convolutional model: its weights fit any image size, so only the
	# input shape the checkpoint keeps says which size it was trained at.
	cat >cv.yaml <<-YAML
	model:
	  name: cv
	  layers: [{conv2d: {filters: 4, kernel_size: 3, activation: relu}}, global_average_pooling2d,
	           {dense: {units: 10, activation: softmax}}]
	compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
	data:
	  train: {format: png_folder, directory: fp/train, color_mode: grayscale}
	  rescale: 1/255
	  batch_size: 32
	fit: {epochs: 1, seed: 1}
	checkpoint: {dir: $TMP/cv}
	YAML
	run --separate-stderr "$DTRAIN" fit -q cv.yaml
	status_is 0
	find fp/test -name '*.png' | sort | head -20 >imgs.lst
	run --separate-stderr "$DTRAIN" predict -q cv.yaml imgs.lst
	status_is 0
	want=$output
	[ "${#lines[@]}" -eq 20 ]
	# A 40 x 40 image added later, first of the first class: the size png_folder would now pick.
	python3 -c "import sys; sys.path.insert(0, '$REPO/models'); from fashion_png import png_gray8
open('fp/train/Ankle_boot/!new.png', 'wb').write(png_gray8(40, 40, bytes(range(40)) * 40))"
	run --separate-stderr "$DTRAIN" predict -q cv.yaml imgs.lst
	status_is 0
	[ "$output" = "$want" ]
	# The training folder is not needed at all.
	mv fp/train fp/gone
	run --separate-stderr "$DTRAIN" predict -q cv.yaml imgs.lst
	status_is 0
	[ "$output" = "$want" ]
}
