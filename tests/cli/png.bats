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

@test "an empty class folder is an error naming it" {
	mkdir fp/train/Zebra
	fit_png
	not_crashed
	status_is 1
	stderr_has "class folder '$TMP/fp/train/Zebra' holds no .png files"
}
