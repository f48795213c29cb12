/*
 * The CSV and NumPy sources and the stream readers of dtrain predict, on
 * small files written here: every layout and dtype, and every way the files
 * can be wrong (a clear error naming the file and the row or record, never a
 * crash).
 */
#include "helpers.h"

#include <zlib.h>

#include "core/config/config.h"
#include "core/pipeline/source.h"
#include "data/reader.h"
#include "data/sources.h"

static char *write_text(const char *suffix, const char *text) { return dt_test_write_file(suffix, text, strlen(text)); }

static char *write_gzip(const void *data, size_t n)
{
	char *path = dt_test_write_file(".csv.gz", "", 0);
	gzFile gz = gzopen(path, "wb");
	assert_non_null(gz);
	assert_int_equal(gzwrite(gz, data, (unsigned)n), (int)n);
	assert_int_equal(gzclose(gz), Z_OK);
	return path;
}

static void drop(char *path)
{
	unlink(path);
	free(path);
}

static void read_all(struct dt_source *s, float *x, float *y)
{
	int64_t idx[64];
	for (int i = 0; i < s->count; i++)
		idx[i] = i;
	assert_int_equal(s->type->read(s, idx, (int)s->count, x, y, NULL), 0);
}

static const char iris[] = "sepal,petal,species\n"
			   "1.5,2,virginica\n"
			   "\n"
			   "3,-4e1,setosa\r\n"
			   "5, 6 ,versicolor\n"
			   "7,8,setosa\n";

static void test_csv_categorical(void **state)
{
	char *f = write_text(".csv", iris);
	struct dt_source s;
	float x[8], y[4];

	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nlabel: species\n", f), 0);
	assert_int_equal(s.count, 4);
	assert_int_equal(s.sample.ndim, 1);
	assert_int_equal(s.sample.dim[0], 2);
	assert_int_equal(s.label.dim[0], 1);
	assert_int_equal(s.num_classes, 3);
	assert_non_null(s.class_names);
	assert_string_equal(s.class_names[0], "setosa"); /* sorted, as LabelEncoder */
	assert_string_equal(s.class_names[1], "versicolor");
	assert_string_equal(s.class_names[2], "virginica");
	read_all(&s, x, y);
	assert_true(x[0] == 1.5f && x[1] == 2 && x[2] == 3 && x[3] == -40 && x[4] == 5 && x[5] == 6);
	assert_true(y[0] == 2 && y[1] == 0 && y[2] == 1 && y[3] == 0);
	dt_source_close(&s);

	/* The default label is the last column; the same by index, from the end. */
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f), 0);
	assert_int_equal(s.num_classes, 3);
	dt_source_close(&s);
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nlabel: -1\n", f), 0);
	assert_int_equal(s.num_classes, 3);
	dt_source_close(&s);
	drop(f);
}

static void test_csv_numeric_labels_no_header(void **state)
{
	char *f = write_text(".txt", "2;0.5;1\n0;1.5;2\n4;2.5;3\n");
	struct dt_source s;
	float x[6], y[3];

	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nheader: false\nlabel: 0\ndelimiter: \";\"\n", f), 0);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.sample.dim[0], 2);
	assert_int_equal(s.num_classes, 5); /* whole numbers stay as given: classes 0..4 */
	assert_null(s.class_names);
	read_all(&s, x, y);
	assert_true(y[0] == 2 && y[1] == 0 && y[2] == 4);
	assert_true(x[0] == 0.5f && x[1] == 1 && x[4] == 2.5f && x[5] == 3);
	dt_source_close(&s);

	/* Label in the middle, by negative index; fractional labels are values, not classes. */
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nheader: false\nlabel: -2\ndelimiter: \";\"\n", f),
			 0);
	assert_int_equal(s.num_classes, 0);
	read_all(&s, x, y);
	assert_true(y[0] == 0.5f && x[0] == 2 && x[1] == 1);
	dt_source_close(&s);
	drop(f);
}

/*
 * A test file numbers its labels by the training classes: one that lacks a
 * class (versicolor) keeps virginica as class 2; a label training never saw
 * is a bad row naming the row, skipped with bad[]; class numbers must be
 * below the training count.
 */
static void test_csv_class_map(void **state)
{
	static char *const train[] = { "setosa", "versicolor", "virginica" };
	const struct dt_class_map names = { .n = 3, .names = train }, numbers = { .n = 3 };
	char *f = write_text(".csv", "a,b,species\n1,2,virginica\n3,4,setosa\n5,6,dog\n7,8,virginica\n");
	struct dt_source s;
	int64_t idx[4] = { 0, 1, 2, 3 };
	float x[8], y[4];
	uint8_t bad[4];
	int32_t labels[4];

	assert_int_equal(dt_test_open_source_classes(&s, &names, "{format: csv, path: '%s'}", f), 0);
	assert_int_equal(s.count, 4);
	assert_int_equal(s.num_classes, 3);
	assert_string_equal(s.class_names[1], "versicolor");
	assert_int_equal(s.type->read(&s, idx, 4, x, y, bad), 0);
	assert_true(!bad[0] && !bad[1] && bad[2] && !bad[3]);
	assert_true(y[0] == 2 && y[1] == 0 && y[3] == 2); /* on its own the file would number virginica 1 */
	s.type->labels(&s, labels);
	assert_true(labels[0] == 2 && labels[1] == 0 && labels[2] == -1 && labels[3] == 2);
	assert_int_equal(s.type->read(&s, idx + 2, 1, x, y, NULL), -1);
	assert_error_contains(f);
	assert_error_contains("row 4: label 'dog' is not a class of the training data ('setosa', 'versicolor', 'virginica')");
	dt_source_close(&s);

	/* Without the map the file numbers its own classes. */
	assert_int_equal(dt_test_open_source(&s, "{format: csv, path: '%s'}", f), 0);
	assert_int_equal(s.num_classes, 3);
	assert_string_equal(s.class_names[2], "virginica");
	dt_source_close(&s);
	drop(f);

	/* Class numbers: kept, but one from the training class count up is a bad row. */
	f = write_text(".csv", "1,2,0\n3,4,2\n5,6,3\n");
	assert_int_equal(dt_test_open_source_classes(&s, &numbers, "{format: csv, path: '%s'}", f), 0);
	assert_int_equal(s.num_classes, 3);
	assert_null(s.class_names);
	assert_int_equal(s.type->read(&s, idx, 3, x, y, bad), 0);
	assert_true(!bad[0] && !bad[1] && bad[2] && y[0] == 0 && y[1] == 2);
	assert_int_equal(s.type->read(&s, idx + 2, 1, x, y, NULL), -1);
	assert_error_contains("row 3: label '3' is not a class of the training data (0 to 2)");
	dt_source_close(&s);
	drop(f);

	/* No row has a training class: an error when the file is opened. */
	f = write_text(".csv", "1,2,dog\n3,4,cat\n");
	dt_error_set_quiet(1);
	assert_int_equal(dt_test_open_source_classes(&s, &names, "{format: csv, path: '%s'}", f), -1);
	dt_error_set_quiet(0);
	assert_error_contains("has no readable row; the first: row 1: label 'dog' is not a class");
	drop(f);
}

/*
 * Columns by name: a training header's feature names are kept (none when a
 * name repeats); a file opened with them takes each feature from the column
 * of its name, whatever its place, and refuses a missing or a foreign
 * feature column; a file without a header is read by position. predict's
 * stream reader does the same.
 */
static void test_csv_columns_by_name(void **state)
{
	static char *const features[] = { "a", "b", "c" };
	const struct dt_class_map map = { .nfeatures = 3, .features = features };
	char *train = write_text(".csv", "a,b,c,y\n1,2,3,p\n4,5,6,q\n");
	char *moved = write_text(".csv", "y,c,a,b\np,3,1,2\n");
	char *missing = write_text(".csv", "a,b,d,y\n1,2,3,p\n");
	char *extra = write_text(".csv", "a,b,c,e,y\n1,2,3,9,p\n");
	char *plain = write_text(".csv", "3,1,2,p\n");
	char *twice = write_text(".csv", "a,a,b,y\n1,2,3,p\n");
	char *stream = write_text(".csv", "c,b,a\n3,2,1\n");
	struct dt_reader_opts o = { .sample = dt_shape_make(1, (int[]){ 3 }), .features = features, .nfeatures = 3 };
	struct dt_reader r;
	struct dt_source s;
	float x[6], y[2];

	assert_int_equal(dt_test_open_source(&s, "{format: csv, path: '%s', label: y}", train), 0);
	assert_non_null(s.feature_names);
	assert_true(!strcmp(s.feature_names[0], "a") && !strcmp(s.feature_names[2], "c"));
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source_classes(&s, &map, "{format: csv, path: '%s', label: y}", moved), 0);
	read_all(&s, x, y);
	assert_true(x[0] == 1 && x[1] == 2 && x[2] == 3);
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source_classes(&s, &map, "{format: csv, path: '%s', label: y}", missing), -1);
	assert_error_contains(missing);
	assert_error_contains("has no column 'c' in its header (row 1), a feature of the training data");
	assert_int_equal(dt_test_open_source_classes(&s, &map, "{format: csv, path: '%s', label: y}", extra), -1);
	assert_error_contains("has a column 'e' (row 1, its header) that is not a feature of the training data");

	/* No header: by position, as written. */
	assert_int_equal(dt_test_open_source_classes(&s, &map, "{format: csv, path: '%s', label: -1}", plain), 0);
	read_all(&s, x, y);
	assert_true(x[0] == 3 && x[1] == 1 && x[2] == 2);
	assert_null(s.feature_names);
	dt_source_close(&s);

	/* Names that repeat find no column: none kept. */
	assert_int_equal(dt_test_open_source(&s, "{format: csv, path: '%s', label: y}", twice), 0);
	assert_null(s.feature_names);
	dt_source_close(&s);

	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, stream, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), 1);
	assert_true(x[0] == 1 && x[1] == 2 && x[2] == 3);
	dt_reader_close(&r);
	o.features = (char *const[]){ "a", "b", "d" };
	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, stream, &o), -1);
	assert_error_contains("has no column 'd' in its header (row 1), a feature of the training data");

	drop(train);
	drop(moved);
	drop(missing);
	drop(extra);
	drop(plain);
	drop(twice);
	drop(stream);
}

static void test_csv_gzip_tab_quotes_shape(void **state)
{
	static const char text[] = "a\tb\tc\td\tname\n1\t2\t3\t4\t\"x\ty\"\n5\t6\t7\t8\t\"say \"\"hi\"\"\"\n";
	char *f = write_gzip(text, strlen(text));
	struct dt_source s;
	float x[8], y[2];

	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\ndelimiter: \"\\t\"\nshape: [2, 2, 1]\n", f), 0);
	assert_int_equal(s.count, 2);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[0], 2);
	assert_int_equal(s.num_classes, 2);
	assert_string_equal(s.class_names[0], "say \"hi\"");
	assert_string_equal(s.class_names[1], "x\ty");
	read_all(&s, x, y);
	assert_true(x[7] == 8 && y[0] == 1 && y[1] == 0);
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\ndelimiter: \"\\t\"\nshape: [3]\n", f), -1);
	assert_error_contains("shape (3,) holds 3 values");
	assert_error_contains("4 features");
	drop(f);
}

static void test_csv_bad_rows(void **state)
{
	char *f = write_text(".csv", "a,b,y\n1,2,0\n3,abc,1\n4,5\n6,7,\n8,9,1\n");
	struct dt_source s;
	int64_t idx[5] = { 0, 1, 2, 3, 4 };
	float x[10], y[5];
	uint8_t bad[5];

	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f), 0);
	assert_int_equal(s.count, 5); /* bad rows stay records */
	assert_int_equal(s.type->read(&s, idx, 5, x, y, bad), 0);
	assert_true(bad[0] == 0 && bad[1] == 1 && bad[2] == 1 && bad[3] == 1 && bad[4] == 0);
	assert_true(x[8] == 8 && y[4] == 1);
	assert_int_equal(s.type->read(&s, idx, 1, x, y, NULL), 0);
	assert_int_equal(s.type->read(&s, idx + 1, 1, x, y, NULL), -1);
	assert_error_contains(f);
	assert_error_contains("row 3, column 'b': 'abc' is not a number");
	assert_int_equal(s.type->read(&s, idx + 2, 1, x, y, NULL), -1);
	assert_error_contains("row 4: expected 3 fields, found 2");
	assert_int_equal(s.type->read(&s, idx + 3, 1, x, y, NULL), -1);
	assert_error_contains("row 5: the label is empty");
	idx[0] = 5;
	assert_int_equal(s.type->read(&s, idx, 1, x, y, NULL), -1);
	assert_error_contains("out of range");
	dt_source_close(&s);
	drop(f);
}

static void expect_csv_error(const char *text, const char *args, const char *const *needles)
{
	char *f = write_text(".csv", text);
	struct dt_source s;
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n%s", f, args), -1);
	assert_null(s.priv);
	for (; *needles; needles++)
		assert_error_contains(*needles);
	drop(f);
}

static void test_csv_errors(void **state)
{
	static const char ok[] = "a,b,species\n1,2,x\n";
	uint8_t garbage[4096];
	struct dt_source s;
	char *f;

	expect_csv_error("", "", (const char *[]){ "is empty", NULL });
	expect_csv_error("a,b,c\n", "", (const char *[]){ "has a header but no rows", NULL });
	expect_csv_error("a,b,c\n1,x,2\n1,2\n", "", (const char *[]){ "no readable row", "row 2", NULL });
	expect_csv_error(ok, "label: specie\n", (const char *[]){ "no column 'specie'", "did you mean 'species'", NULL });
	expect_csv_error(ok, "label: 3\n", (const char *[]){ "label column 3 is out of range", "has 3 columns", NULL });
	expect_csv_error(ok, "label: species\nheader: false\n", (const char *[]){ "no header", NULL });
	expect_csv_error(ok, "delimiter: \";;\"\n", (const char *[]){ "one character", NULL });
	expect_csv_error(ok, "labels: 1\n", (const char *[]){ "unknown key 'labels'", NULL });
	expect_csv_error("\"a,b\n1,2\n", "", (const char *[]){ "row 1", "closing quote", NULL });
	expect_csv_error("a\n1\n", "", (const char *[]){ "expected features and a label", NULL });

	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: /nonexistent/x.csv\n"), -1);
	assert_error_contains("cannot open '/nonexistent/x.csv'");

	/* Garbage bytes: an error or bad rows, never a crash. */
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)(i * 2654435761u >> 13);
	f = dt_test_write_file(".csv", garbage, sizeof(garbage));
	if (dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f) == 0)
		dt_source_close(&s);
	else
		assert_error_contains(f);
	drop(f);

	/* A gzip stream cut short. */
	{
		char big[20000];
		size_t n = 0;
		FILE *fp;
		long size;
		n += sprintf(big, "a,b\n");
		while (n < sizeof(big) - 40)
			n += sprintf(big + n, "%zu,%zu\n", n, n % 3);
		f = write_gzip(big, n);
		fp = fopen(f, "r+");
		fseek(fp, 0, SEEK_END);
		size = ftell(fp);
		fclose(fp);
		assert_int_equal(truncate(f, size / 2), 0);
		assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f), -1);
		assert_error_contains(f);
		assert_error_contains("truncated");
		drop(f);
	}
}

/* count rows of text under args, or -1 when the source does not open. */
static int64_t csv_count(const char *text, size_t n, const char *args)
{
	char *f = dt_test_write_file(".csv", text, n);
	struct dt_source s;
	int64_t count = -1;
	if (dt_test_open_source(&s, "format: csv\npath: \"%s\"\n%s", f, args) == 0) {
		count = s.count;
		dt_source_close(&s);
	}
	drop(f);
	return count;
}

#define CSV_COUNT(text, args) csv_count(text, sizeof(text) - 1, args)

static void test_csv_header_auto(void **state)
{
	struct dt_source s;
	int64_t idx[3] = { 0, 1, 2 };
	float x[6], y[3];
	char *f;

	/* No header: every row is a record (header: true, the old default, dropped the first). */
	assert_int_equal(CSV_COUNT("1,2,0\n3,4,1\n5,6,0\n", ""), 3);
	assert_int_equal(CSV_COUNT("1,2,0\n3,4,1\n5,6,0\n", "header: auto\n"), 3);
	assert_int_equal(CSV_COUNT("1,2,0\n3,4,1\n5,6,0\n", "header: true\n"), 2);
	/* Label strings are not a header: only the feature fields decide (UCI's iris.data). */
	assert_int_equal(CSV_COUNT("5.1,3.5,Iris-setosa\n4.9,3,Iris-versicolor\n", ""), 2);
	assert_int_equal(CSV_COUNT("Iris-setosa,5.1,3.5\n", "label: 0\n"), 1);
	/* Names are a header; header: false keeps them as a (bad) row. */
	assert_int_equal(CSV_COUNT("a,b,y\n1,2,0\n", ""), 1);
	assert_int_equal(CSV_COUNT("a,b,y\n1,2,0\n", "header: false\n"), 2);
	assert_int_equal(CSV_COUNT("a,b,y\n1,2,0\n", "header: no\n"), 2);
	/* Empty fields decide nothing: a row with a missing value is data. */
	assert_int_equal(CSV_COUNT("1,,0\n3,4,1\n", ""), 2);

	/* nan, inf and 1e999 are numbers: the first row is data, a bad row (not finite, or past float32's range). */
	f = write_text(".csv", "nan,inf,0\n1e999,-inf,1\n1,2,0\n");
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f), 0);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.type->read(&s, idx, 1, x, y, NULL), -1);
	assert_error_contains("row 1, column 1: 'nan' is not a finite number");
	assert_int_equal(s.type->read(&s, idx + 1, 1, x, y, NULL), -1);
	assert_error_contains("row 2, column 1: '1e999' is beyond float32's range");
	assert_int_equal(s.type->read(&s, idx + 2, 1, x, y, NULL), 0);
	dt_source_close(&s);
	drop(f);

	/* A label by name needs a header: a first row of data is an error naming the file, column and row. */
	expect_csv_error("1,2,0\n3,4,1\n", "label: kind\n", (const char *[]){ "no column 'kind'", "row 1", "is data", NULL });
	expect_csv_error("a,b,c\n1,2,0\n", "header: maybe\n", (const char *[]){ "header must be auto, true or false", NULL });
}

static void test_csv_skip_rows(void **state)
{
	static const char text[] = "150,2,setosa,virginica\n"
				   "\n"
				   "sepal,petal,species\n"
				   "1,2,setosa\n"
				   "3,x,virginica\n";
	char *f = write_text(".csv", text);
	struct dt_source s;
	int64_t idx[2] = { 0, 1 };
	float x[4], y[2];

	/* skip_rows counts lines, blank or not; rows keep their line numbers. */
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nskip_rows: 2\nlabel: species\n", f), 0);
	assert_int_equal(s.count, 2);
	assert_string_equal(s.class_names[0], "setosa");
	assert_int_equal(s.type->read(&s, idx, 1, x, y, NULL), 0);
	assert_true(x[0] == 1 && x[1] == 2 && y[0] == 0);
	assert_int_equal(s.type->read(&s, idx + 1, 1, x, y, NULL), -1);
	assert_error_contains("row 5, column 'petal': 'x' is not a number");
	dt_source_close(&s);
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nskip_rows: 1\nlabel: species\n", f), 0);
	assert_int_equal(s.count, 2);
	dt_source_close(&s);
	drop(f);

	expect_csv_error(text, "skip_rows: 5\n", (const char *[]){ "no rows after the 5 lines of skip_rows", NULL });
	expect_csv_error(text, "skip_rows: 9\n", (const char *[]){ "no rows after the 9 lines of skip_rows", NULL });
	expect_csv_error(text, "skip_rows: -1\n", (const char *[]){ "skip_rows", NULL });
}

static void test_csv_bom_and_nul(void **state)
{
	static const char bom[] = "\xEF\xBB\xBFkind,a,b\nx,1,2\ny,3,4\n";
	static const char nul[] = "a,b,y\n1,2,0\n3,4\0,9,1\n5,6,1\n";
	struct dt_source s;
	int64_t idx[3] = { 0, 1, 2 };
	float x[6], y[3];
	uint8_t bad[3];
	char *f;

	/* A UTF-8 byte-order mark is not part of the first column's name, nor a header of numbers. */
	assert_int_equal(CSV_COUNT(bom, "label: kind\n"), 2);
	assert_int_equal(CSV_COUNT("\xEF\xBB\xBF" "1,2,0\n3,4,1\n", ""), 2);
	f = dt_test_write_file(".csv", bom, sizeof(bom) - 1);
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\nlabel: kind\n", f), 0);
	assert_string_equal(s.class_names[0], "x");
	dt_source_close(&s);
	drop(f);

	/* A NUL byte makes a bad row of its line alone, named by its line number. */
	f = dt_test_write_file(".csv", nul, sizeof(nul) - 1);
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f), 0);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.type->read(&s, idx, 3, x, y, bad), 0);
	assert_true(!bad[0] && bad[1] && !bad[2]);
	assert_true(x[4] == 5 && x[5] == 6 && y[2] == 1);
	assert_int_equal(s.type->read(&s, idx + 1, 1, x, y, NULL), -1);
	assert_error_contains(f);
	assert_error_contains("row 3: the row holds a NUL byte");
	dt_source_close(&s);
	drop(f);

	/* UTF-16 (NUL bytes from the first row on): an error at open, not rows of nonsense. */
	f = dt_test_write_file(".csv", "a\0,\0b\0\n\0", 9);
	assert_int_equal(dt_test_open_source(&s, "format: csv\npath: \"%s\"\n", f), -1);
	assert_error_contains("row 1: the first row holds a NUL byte");
	drop(f);
}

/* ---- npy ---- */

/* A .npy file of the given version, descr, order and shape text, then n data bytes. */
static char *write_npy(int version, const char *descr, const char *fortran, const char *shape, const void *data,
		       size_t n)
{
	char dict[256], *buf, *path;
	int pre = version == 1 ? 10 : 12, len, total;
	len = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran,
		       shape);
	total = (pre + len + 1 + 63) / 64 * 64;
	buf = calloc(1, total + n);
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (char)version;
	buf[7] = 0;
	if (version == 1) {
		buf[8] = (char)((total - pre) & 255);
		buf[9] = (char)((total - pre) >> 8);
	} else {
		uint32_t h = (uint32_t)(total - pre);
		memcpy(buf + 8, &h, 4);
	}
	memset(buf + pre, ' ', total - pre);
	memcpy(buf + pre, dict, len);
	buf[total - 1] = '\n';
	memcpy(buf + total, data, n);
	path = dt_test_write_file(".npy", buf, total + n);
	free(buf);
	return path;
}

/* 0, 1, ..., n-1 in the dtype of descr; returns the byte count. */
static size_t npy_data(const char *descr, int n, uint8_t *out)
{
	int size = descr[2] - '0';
	for (int i = 0; i < n; i++) {
		uint8_t *p = out + (size_t)i * size;
		if (!strcmp(descr + 1, "f4")) {
			float v = (float)i;
			memcpy(p, &v, 4);
		} else if (!strcmp(descr + 1, "f8")) {
			double v = i;
			memcpy(p, &v, 8);
		} else if (!strcmp(descr + 1, "b1")) {
			p[0] = (uint8_t)(i & 1);
		} else {
			int64_t v = descr[1] == 'i' ? -i : i; /* signed types hold negatives */
			memcpy(p, &v, size);
		}
	}
	return (size_t)n * size;
}

static void test_npy_dtypes_versions(void **state)
{
	static const char *const descrs[] = { "<f4", "<f8", "|u1", "|i1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "|b1", NULL };
	uint8_t xd[6 * 8], yd[3] = { 0, 2, 1 };
	float x[6], y[3];

	for (int v = 1; v <= 3; v++) {
		for (int k = 0; descrs[k]; k++) {
			size_t n = npy_data(descrs[k], 6, xd);
			char *xf = write_npy(v, descrs[k], "False", "(3, 2)", xd, n);
			char *yf = write_npy(v, "|u1", "False", "(3,)", yd, 3);
			struct dt_source s;
			if (dt_test_open_source(&s, "format: npy\nx: \"%s\"\ny: \"%s\"\n", xf, yf) != 0)
				fail_msg("version %d, %s: %s", v, descrs[k], dt_error_last());
			assert_int_equal(s.count, 3);
			assert_int_equal(s.sample.ndim, 1);
			assert_int_equal(s.sample.dim[0], 2);
			assert_int_equal(s.num_classes, 3);
			read_all(&s, x, y);
			for (int i = 0; i < 6; i++) {
				float want = descrs[k][1] == 'b' ? (float)(i & 1) : descrs[k][1] == 'i' ? -i : i;
				if (x[i] != want)
					fail_msg("%s element %d: %g, expected %g", descrs[k], i, x[i], want);
			}
			assert_true(y[0] == 0 && y[1] == 2 && y[2] == 1);
			dt_source_close(&s);
			drop(xf);
			drop(yf);
		}
	}
}

static void test_npy_shapes_and_vectors(void **state)
{
	float xd[24], yd[6] = { 1, 0, 0, 1, 0.5f, 0.5f }, x[24], y[6];
	char *xf, *yf;
	struct dt_source s;

	for (int i = 0; i < 24; i++)
		xd[i] = (float)i;
	xf = write_npy(1, "<f4", "False", "(3, 2, 4, 1)", xd, sizeof(xd));
	yf = write_npy(1, "<f4", "False", "(3, 2)", yd, sizeof(yd));
	assert_int_equal(dt_test_open_source(&s, "format: npy\nx: \"%s\"\ny: \"%s\"\n", xf, yf), 0);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[1], 4);
	assert_int_equal(s.label.dim[0], 2);
	assert_int_equal(s.num_classes, 0);
	read_all(&s, x, y);
	assert_true(x[23] == 23 && y[4] == 0.5f);
	dt_source_close(&s);
	drop(xf);
	drop(yf);
}

static void expect_npy_error(const char *xf, const char *yf, const char *const *needles)
{
	struct dt_source s;
	assert_int_equal(dt_test_open_source(&s, "format: npy\nx: \"%s\"\ny: \"%s\"\n", xf, yf), -1);
	assert_null(s.priv);
	for (; *needles; needles++)
		assert_error_contains(*needles);
}

static void test_npy_errors(void **state)
{
	float d[6] = { 0 };
	uint8_t yd[3] = { 0 };
	char *y3 = write_npy(1, "|u1", "False", "(3,)", yd, 3);
	char *y2 = write_npy(1, "|u1", "False", "(2,)", yd, 2);
	char *good = write_npy(1, "<f4", "False", "(3, 2)", d, sizeof(d));
	char *cut = write_npy(1, "<f4", "False", "(3, 2)", d, sizeof(d) - 5);
	char *more = write_npy(1, "<f4", "False", "(3, 2)", d, sizeof(d)); /* made longer below */
	char *big = write_npy(1, ">f4", "False", "(3, 2)", d, sizeof(d));
	char *fort = write_npy(1, "<f4", "True", "(3, 2)", d, sizeof(d));
	char *cplx = write_npy(1, "<c8", "False", "(3, 2)", d, sizeof(d));
	char *noshape = write_npy(1, "<f4", "False", "[3, 2]", d, sizeof(d));
	char *huge = write_npy(1, "<f4", "False", "(4000000000000, 2)", d, sizeof(d));
	char *magic = write_text(".npy", "PK\003\004 this is a zip, not an npy");
	char *v9 = write_npy(9, "<f4", "False", "(3, 2)", d, sizeof(d));
	char *head = dt_test_write_file(".npy", "\x93NUMPY\x01\x00\x40\x00{'descr'", 17);
	char *empty = write_text(".npy", "");
	char *y3d = write_npy(3, "<f4", "False", "(3, 2, 1)", d, sizeof(d));
	/* A dimension past INT64_MAX (strtoll's LLONG_MAX) after another: the message multiplied them (fuzz). */
	char *wide = write_npy(1, "<i1", "False", "(5, 7, 48888888888888888888888888888888)", d, sizeof(d));
	char *flat = write_npy(1, "<f4", "False", "(3, 0)", d, 0);
	FILE *fp = fopen(more, "a");

	fputs("junk", fp);
	fclose(fp);
	expect_npy_error(good, y2, (const char *[]){ good, "3 records", y2, "2 labels", NULL });
	expect_npy_error(cut, y3, (const char *[]){ cut, "truncated", "2 whole records", NULL });
	expect_npy_error(more, y3, (const char *[]){ more, "trailing data", NULL });
	expect_npy_error(big, y3, (const char *[]){ big, "big-endian", NULL });
	expect_npy_error(fort, y3, (const char *[]){ fort, "Fortran order", NULL });
	expect_npy_error(cplx, y3, (const char *[]){ cplx, "dtype '<c8'", NULL });
	expect_npy_error(noshape, y3, (const char *[]){ noshape, "no shape", NULL });
	expect_npy_error(huge, y3, (const char *[]){ huge, "truncated", NULL });
	expect_npy_error(magic, y3, (const char *[]){ magic, "not a .npy file", NULL });
	expect_npy_error(v9, y3, (const char *[]){ v9, "version 9.0", NULL });
	expect_npy_error(head, y3, (const char *[]){ head, "truncated", NULL });
	expect_npy_error(empty, y3, (const char *[]){ empty, "is empty", NULL });
	expect_npy_error(good, y3d, (const char *[]){ y3d, "3 dimensions", NULL });
	expect_npy_error(wide, y3, (const char *[]){ wide, "more than 2147483647 elements", "dimension 2", NULL });
	expect_npy_error(flat, y3, (const char *[]){ flat, "records of no values", NULL });
	drop(wide);
	drop(flat);
	drop(y3);
	drop(y2);
	drop(good);
	drop(cut);
	drop(more);
	drop(big);
	drop(fort);
	drop(cplx);
	drop(noshape);
	drop(huge);
	drop(magic);
	drop(v9);
	drop(head);
	drop(empty);
	drop(y3d);
}

/* Every prefix of a good .npy fails with an error naming the file; flipped bytes never crash. */
static void test_npy_every_truncation_and_flip(void **state)
{
	float d[6] = { 1, 2, 3, 4, 5, 6 };
	uint8_t y[3] = { 0, 1, 2 };
	char *good = write_npy(1, "<f4", "False", "(3, 2)", d, sizeof(d)), *yf = write_npy(1, "|u1", "False", "(3,)", y, 3);
	FILE *fp = fopen(good, "rb");
	uint8_t bytes[256];
	size_t n = fread(bytes, 1, sizeof(bytes), fp);
	struct dt_source s;

	fclose(fp);
	for (size_t k = 0; k < n; k++) {
		char *f = dt_test_write_file(".npy", bytes, k);
		assert_int_equal(dt_test_open_source(&s, "format: npy\nx: \"%s\"\ny: \"%s\"\n", f, yf), -1);
		assert_error_contains(f);
		drop(f);
	}
	for (size_t k = 0; k < n; k++) {
		uint8_t b[256];
		char *f;
		memcpy(b, bytes, n);
		b[k] ^= (uint8_t)(0x5a + k);
		f = dt_test_write_file(".npy", b, n);
		if (dt_test_open_source(&s, "format: npy\nx: \"%s\"\ny: \"%s\"\n", f, yf) == 0)
			dt_source_close(&s);
		else
			assert_error_contains(f);
		drop(f);
	}
	drop(good);
	drop(yf);
}

/* ---- stream readers ---- */

static struct dt_doc *train_doc(const char *text)
{
	struct dt_doc *d = dt_doc_parse("train.yaml", text, ".");
	assert_non_null(d);
	return d;
}

static void test_reader_csv(void **state)
{
	char *plain = write_text(".csv", "1,2\n3,4\n5,6\n");
	char *layout = write_text(".csv", "sepal,species,petal\n1,a,2\n3,b,4\n5,a,6\n");
	char *bad = write_text(".csv", "1,2\n3,4\n5,x\n");
	struct dt_doc *d = train_doc("format: csv\npath: x.csv\nlabel: species\n");
	struct dt_reader_opts o = { .sample = dt_shape_make(1, (int[]){ 2 }) };
	struct dt_reader r;
	float x[6];

	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, plain, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), 2);
	assert_int_equal(r.type->next(&r, 2, x + 4), 1);
	assert_int_equal(r.type->next(&r, 2, x), 0);
	assert_true(x[0] == 1 && x[3] == 4 && x[4] == 5 && x[5] == 6);
	dt_reader_close(&r);

	o.train = dt_doc_root(d); /* the training layout: its label column is skipped */
	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, layout, &o), 0);
	assert_int_equal(r.type->next(&r, 8, x), 3);
	assert_true(x[0] == 1 && x[1] == 2 && x[4] == 5 && x[5] == 6);
	dt_reader_close(&r);

	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, bad, &o), 0);
	assert_int_equal(r.type->next(&r, 8, x), -1);
	assert_error_contains(bad);
	assert_error_contains("row 3, column 2: 'x' is not a number");
	dt_reader_close(&r);

	o.sample = dt_shape_make(1, (int[]){ 4 });
	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, plain, &o), -1);
	assert_error_contains("expected 4 fields");
	o.sample.ndim = 0;
	assert_int_equal(dt_reader_open(&r, &dt_csv_reader, plain, &o), -1);
	assert_error_contains("needs the model's input shape");
	dt_doc_free(d);
	drop(plain);
	drop(layout);
	drop(bad);
}

/* The rows predict's CSV reader hands out of text (features of 2 values), or -1 after an error. */
static int reader_rows(const char *text, size_t n, float *x)
{
	char *f = dt_test_write_file(".csv", text, n);
	struct dt_reader_opts o = { .sample = dt_shape_make(1, (int[]){ 2 }) };
	struct dt_reader r;
	int got = -1;
	if (dt_reader_open(&r, &dt_csv_reader, f, &o) == 0) {
		got = r.type->next(&r, 8, x);
		dt_reader_close(&r);
	}
	drop(f);
	return got;
}

#define READER_ROWS(text, x) reader_rows(text, sizeof(text) - 1, x)

static void test_reader_csv_first_row(void **state)
{
	float x[16];

	assert_int_equal(READER_ROWS("a,b\n1,2\n3,4\n", x), 2);
	assert_int_equal(READER_ROWS("1,2\n3,4\n", x), 2);
	/* A byte-order mark does not make the first row a header. */
	assert_int_equal(READER_ROWS("\xEF\xBB\xBF" "1,2\n3,4\n", x), 2);
	assert_true(x[0] == 1 && x[3] == 4);
	/* nan, inf, 1e999 are numbers: the first row is data, and an error (not taken for a header). */
	assert_int_equal(READER_ROWS("nan,inf\n1,2\n", x), -1);
	assert_error_contains("row 1, column 1: 'nan' is not a finite number");
	assert_int_equal(READER_ROWS("1,1e999\n1,2\n", x), -1);
	assert_error_contains("row 1, column 2: '1e999' is beyond float32's range");
	/* An empty field is a missing value, not a header. */
	assert_int_equal(READER_ROWS("1,\n1,2\n", x), -1);
	assert_error_contains("row 1, column 2: the field is empty");
	/* A NUL byte is an error naming its row (it once cut the row and joined the next line to it). */
	assert_int_equal(READER_ROWS("1,2\n3\0,4\n5,6\n", x), -1);
	assert_error_contains("row 2: the row holds a NUL byte");
	assert_int_equal(READER_ROWS("1\0,2\n5,6\n", x), -1);
	assert_error_contains("row 1: the row holds a NUL byte");
}

static void test_reader_npy_idx(void **state)
{
	float d[12], x[12];
	uint8_t idx[16 + 12];
	char *npy, *cut, *im;
	struct dt_reader_opts o = { 0 };
	struct dt_reader r;

	for (int i = 0; i < 12; i++)
		d[i] = (float)i, idx[16 + i] = (uint8_t)(100 + i);
	npy = write_npy(2, "<f4", "False", "(4, 3)", d, sizeof(d));
	cut = write_npy(2, "<f4", "False", "(4, 3)", d, sizeof(d) - 4);
	assert_int_equal(dt_reader_open(&r, &dt_npy_reader, npy, &o), 0);
	assert_int_equal(r.sample.ndim, 1);
	assert_int_equal(r.sample.dim[0], 3);
	assert_int_equal(r.type->next(&r, 3, x), 3);
	assert_int_equal(r.type->next(&r, 3, x), 1);
	assert_true(x[0] == 9 && x[2] == 11);
	assert_int_equal(r.type->next(&r, 3, x), 0);
	dt_reader_close(&r);
	assert_int_equal(dt_reader_open(&r, &dt_npy_reader, cut, &o), 0);
	assert_int_equal(r.type->next(&r, 3, x), 3);
	assert_int_equal(r.type->next(&r, 3, x), -1);
	assert_error_contains("record 3 is cut short");
	dt_reader_close(&r);
	o.sample = dt_shape_make(1, (int[]){ 5 });
	assert_int_equal(dt_reader_open(&r, &dt_npy_reader, npy, &o), -1);
	assert_error_contains("hold 3 values");

	memcpy(idx, "\0\0\x08\x03\0\0\0\x03\0\0\0\x02\0\0\0\x02", 16);
	im = dt_test_write_file("-ubyte", idx, sizeof(idx));
	o.sample.ndim = 0;
	assert_int_equal(dt_reader_open(&r, &dt_idx_reader, im, &o), 0);
	assert_int_equal(r.sample.ndim, 3);
	assert_int_equal(r.type->next(&r, 8, x), 3);
	assert_true(x[0] == 100 && x[11] == 111);
	dt_reader_close(&r);
	assert_string_equal(dt_reader_guess("a/b.CSV.gz"), "csv");
	assert_string_equal(dt_reader_guess("x.npy"), "npy");
	assert_string_equal(dt_reader_guess("t10k-images-idx3-ubyte.gz"), "idx");
	assert_null(dt_reader_guess("-"));
	drop(npy);
	drop(cut);
	drop(im);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csv_categorical),
		cmocka_unit_test(test_csv_numeric_labels_no_header),
		cmocka_unit_test(test_csv_class_map),
		cmocka_unit_test(test_csv_columns_by_name),
		cmocka_unit_test(test_csv_gzip_tab_quotes_shape),
		cmocka_unit_test(test_csv_bad_rows),
		cmocka_unit_test(test_csv_errors),
		cmocka_unit_test(test_csv_header_auto),
		cmocka_unit_test(test_csv_skip_rows),
		cmocka_unit_test(test_csv_bom_and_nul),
		cmocka_unit_test(test_npy_dtypes_versions),
		cmocka_unit_test(test_npy_shapes_and_vectors),
		cmocka_unit_test(test_npy_errors),
		cmocka_unit_test(test_npy_every_truncation_and_flip),
		cmocka_unit_test(test_reader_csv),
		cmocka_unit_test(test_reader_csv_first_row),
		cmocka_unit_test(test_reader_npy_idx),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
