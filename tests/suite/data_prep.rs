//! Data preparation on the command line: class labels written as text
//! (numbered in sorted or declared order, the mapping printed, written to
//! the JSON and applied to test data), `--split` / `--shuffle` held-out
//! splits, and integral reals where an int is declared.

use crate::common;

use common::{assert_clean_failure, assert_ok, model, out_dir, tempest};
use tempest::{Data, Overrides};

/// A CSV file in the test's folder.
fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Iris with its species named (rows 0–49 setosa, 50–99 versicolor,
/// 100–149 virginica): `sepal length`, `petal length`, `species`.
fn named_iris(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/data/iris.csv"
    ))
    .unwrap();
    let names = ["setosa", "versicolor", "virginica"];
    let mut out = String::from("sepal,petal,species\n");
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let k: usize = f[4].trim().parse::<f64>().unwrap() as usize;
        out.push_str(&format!("{},{},{}\n", f[0], f[2], names[k]));
    }
    write(dir, "iris_named.csv", &out)
}

const IRIS: &str = r#"
data {
  n : int
  X : matrix[n, 2] = columns("sepal", "petal")
  species : int[n]
}
hyper { ell : positive = 1.0  sf2 : positive = 4.0 }
model {
  f ~ gp(0, sf2 * rbf(ell))[3]
  species ~ categorical_logit(f(X))
}
infer mirror_descent { steps = 30 }
"#;

#[test]
fn text_labels_are_numbered_in_sorted_or_declared_order() {
    let dir = out_dir("data_prep_labels");
    let csv = named_iris(&dir);
    let m = write(&dir, "iris.tempest", IRIS);
    let json = dir.join("iris.json");
    let out = assert_ok(&tempest(&[
        "run",
        &m,
        "--data",
        &csv,
        "--split",
        "0.8",
        "--shuffle",
        "3",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]));
    assert!(
        out.contains("split: 120 training rows, 30 test rows (shuffled with seed 3)"),
        "{out}"
    );
    assert!(
        out.contains("labels of `species`: 0 = setosa, 1 = versicolor, 2 = virginica"),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        j["labels"]["species"],
        serde_json::json!(["setosa", "versicolor", "virginica"])
    );
    assert_eq!(j["split"]["test_rows"], 30);
    // The shuffled hold-out has all three species, and the classifier
    // separates them.
    let acc = j["test"]["accuracy"].as_f64().unwrap();
    assert!(acc > 0.85, "accuracy {acc}");

    // Declared levels number the labels in their order.
    let declared = IRIS.replace(
        "species : int[n]",
        r#"species : int[n] = column("species", levels = ["virginica", "setosa", "versicolor"])"#,
    );
    let g = model(&declared);
    let b = g
        .bind(
            &Data::read(std::path::Path::new(&csv)).unwrap(),
            &Overrides::default(),
        )
        .unwrap_or_else(|e| panic!("{}", g.render(&e)));
    let k = b.graph.data_index("species").unwrap();
    let v = b.data[k].flatten();
    assert_eq!((v[0], v[50], v[100]), (1.0, 2.0, 0.0));
    assert_eq!(b.labels[&k], vec!["virginica", "setosa", "versicolor"]);
}

#[test]
fn test_labels_use_the_training_numbering_and_unknown_labels_are_located() {
    let dir = out_dir("data_prep_test_labels");
    let m = write(
        &dir,
        "m.tempest",
        r#"
data { n : int  x : vector[n]  y : int<lower=0, upper=1>[n] }
param { a : real ~ normal(0, 2)  b : real ~ normal(0, 2) }
model { y ~ bernoulli_logit(a + b * x) }
infer nuts { chains = 1  warmup = 200  draws = 200 }
"#,
    );
    let train = write(
        &dir,
        "train.csv",
        "x,y\n-2,no\n-1,no\n-0.5,yes\n0.3,no\n1,yes\n2,yes\n",
    );
    // The test file holds only `yes`: still numbered as in training (1).
    let test = write(&dir, "test.csv", "x,y\n1.5,yes\n2.5,yes\n");
    let json = dir.join("p.json");
    let out = assert_ok(&tempest(&[
        "run",
        &m,
        "--data",
        &train,
        "--test",
        &test,
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]));
    assert!(out.contains("labels of `y`: 0 = no, 1 = yes"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        j["predictions"]["outcomes"][0]["y"],
        serde_json::json!([1.0, 1.0])
    );

    let bad = write(&dir, "bad.csv", "x,y\n1.5,yes\n2.5,maybe\n");
    let err = assert_clean_failure(&tempest(&[
        "run", &m, "--data", &train, "--test", &bad, "-q",
    ]));
    assert!(err.contains("row 1") && err.contains("column `y`"), "{err}");
    assert!(
        err.contains("`maybe` is not among the labels of the training data of `y` (`no`, `yes`)"),
        "{err}"
    );
    // `levels` on a real column is a located error.
    let m2 = write(
        &dir,
        "m2.tempest",
        "data { n : int  y : vector[n] = column(\"y\", levels = [\"a\"]) }\nmodel { y ~ normal(0, 1) }\n",
    );
    let err = assert_clean_failure(&tempest(&["check", &m2]));
    assert!(
        err.contains("the declaration must be an int array"),
        "{err}"
    );
}

#[test]
fn split_and_shuffle_are_reproducible_and_checked() {
    let dir = out_dir("data_prep_split");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "examples/mcycle.tempest",
            "--data",
            "examples/data/mcycle.csv",
            "-q",
        ];
        args.extend_from_slice(extra);
        tempest(&args)
    };
    let a = assert_ok(&run(&["--split", "0.75", "--shuffle", "9"]));
    let b = assert_ok(&run(&["--split", "0.75", "--shuffle", "9"]));
    let c = assert_ok(&run(&["--split", "0.75", "--shuffle", "10"]));
    assert!(a.contains("split: 100 training rows, 33 test rows"), "{a}");
    assert_eq!(a, b, "the same seed gives the same split and fit");
    assert_ne!(a, c, "another seed another split");
    // Without a shuffle the last rows are held out (a forecast).
    let d = assert_ok(&run(&["--split", "0.75"]));
    assert!(
        d.contains("split: 100 training rows, 33 test rows\n"),
        "{d}"
    );
    for (extra, want) in [
        (vec!["--split", "1.0"], "a number between 0 and 1"),
        (vec!["--split", "0.001"], "both parts need at least one"),
    ] {
        let err = assert_clean_failure(&run(&extra));
        assert!(err.contains(want), "{err}");
    }
    let err = assert_clean_failure(&tempest(&[
        "run",
        "examples/eight_schools.tempest",
        "--data",
        "examples/eight_schools.json",
        "--split",
        "0.5",
    ]));
    assert!(err.contains("apply to CSV files"), "{err}");
    // Integral reals bind where an int is declared.
    let counts = std::fs::read_to_string("examples/data/roaches.csv").unwrap();
    let with_reals: String = counts
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                format!("{l}\n")
            } else {
                let mut f: Vec<String> = l.split(',').map(String::from).collect();
                f[0] = format!("{}.0", f[0]);
                format!("{}\n", f.join(","))
            }
        })
        .collect();
    let header = counts.lines().next().unwrap();
    assert!(header.starts_with("\"y\""), "{header}");
    let p = write(&dir, "roaches_reals.csv", &with_reals);
    assert_ok(&tempest(&[
        "check",
        "examples/roaches.tempest",
        "--data",
        &p,
    ]));
}
