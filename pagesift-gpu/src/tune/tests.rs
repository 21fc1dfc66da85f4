use super::*;
use crate::Error;
use std::sync::atomic::AtomicUsize;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pagesift-gpu-tune-test-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("gemm-tune.txt")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn key() -> TuneKey {
    TuneKey::new("NVIDIA H200", 12080)
}

fn open(dir: &TempDir) -> TuneStore {
    TuneStore::open_in(&dir.0, key(), "gemm")
}

/// A store in `dir` with two entries, and its file's bytes.
fn written(dir: &TempDir) -> Vec<u8> {
    let mut store = open(dir);
    store.insert("m4096n4096k4096", "mma128x64/k3").unwrap();
    store.insert("m1n4096k4096", "128x128").unwrap();
    fs::read(dir.file()).unwrap()
}

/// `body` followed by its correct checksum line.
fn with_checksum(body: &[u8]) -> Vec<u8> {
    let mut bytes = body.to_vec();
    bytes.extend_from_slice(format!("fnv1a64\t{:016x}\n", fnv1a64(body)).as_bytes());
    bytes
}

fn header() -> String {
    format!(
        "pagesift-gpu-tune\t1\tNVIDIA H200\t12080\t{}\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// Opens a file holding `bytes`: it must be ignored, with one warning saying so.
fn assert_ignored(bytes: &[u8], what: &str) {
    let dir = TempDir::new();
    fs::write(dir.file(), bytes).unwrap();
    let store = open(&dir);
    assert!(store.is_empty(), "{what}: {store:?}");
    assert_eq!(store.warnings().len(), 1, "{what}: {store:?}");
    assert!(store.warnings()[0].contains("ignored"), "{what}: {store:?}");
}

#[test]
fn round_trip() {
    let dir = TempDir::new();
    let mut store = open(&dir);
    assert!(store.is_empty() && store.warnings().is_empty());
    assert_eq!(store.path(), Some(dir.file().as_path()));
    store.insert("m64n64k64", "128x128").unwrap();
    store.insert("m4096n4096k4096", "mma128x64/k3").unwrap();
    assert_eq!(store.get("m64n64k64"), Some("128x128"));
    assert_eq!(store.get("m4096n4096k4096"), Some("mma128x64/k3"));
    assert_eq!(store.get("m1n1k1"), None);
    assert_eq!(store.len(), 2);
}

#[test]
fn entries_survive_reopening() {
    let dir = TempDir::new();
    written(&dir);
    let store = open(&dir);
    assert!(store.warnings().is_empty(), "{store:?}");
    assert_eq!(store.len(), 2);
    assert_eq!(store.get("m4096n4096k4096"), Some("mma128x64/k3"));
    assert_eq!(store.get("m1n4096k4096"), Some("128x128"));
    let names: Vec<_> = fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["gemm-tune.txt"], "no temporary file is left");
}

#[test]
fn update_overwrites_existing_class() {
    let dir = TempDir::new();
    written(&dir);
    let mut store = open(&dir);
    store.insert("m1n4096k4096", "mma64x64/k2").unwrap();
    assert_eq!(store.get("m1n4096k4096"), Some("mma64x64/k2"));
    assert_eq!(store.len(), 2);
    let store = open(&dir);
    assert_eq!(store.get("m1n4096k4096"), Some("mma64x64/k2"));
    assert_eq!(store.len(), 2);
}

#[test]
fn documented_example_is_a_valid_file() {
    let example = "pagesift-gpu-tune\t1\tNVIDIA H200\t12080\t0.1.0\n\
                   m1n4096k4096\t128x128\n\
                   m4096n4096k4096\tmma128x64/k3\n\
                   fnv1a64\t26b38f1c2e45044f\n";
    let key = TuneKey {
        crate_version: "0.1.0".into(),
        ..key()
    };
    let mut entries = BTreeMap::new();
    entries.insert("m4096n4096k4096".to_owned(), "mma128x64/k3".to_owned());
    entries.insert("m1n4096k4096".to_owned(), "128x128".to_owned());
    assert_eq!(render(&key, &entries), example);
    assert_eq!(parse(example.as_bytes(), &key).unwrap(), entries);
}

/// Each field of the key in turn differs: the file is stale, and the next insert replaces it.
#[test]
fn stale_key_is_ignored_and_replaced() {
    let others = [
        ("driver", TuneKey::new("NVIDIA H200", 12090)),
        ("device", TuneKey::new("NVIDIA A100-SXM4-80GB", 12080)),
        (
            "crate version",
            TuneKey {
                crate_version: "0.0.9".into(),
                ..key()
            },
        ),
    ];
    for (field, other) in others {
        let dir = TempDir::new();
        written(&dir);
        let mut store = TuneStore::open_in(&dir.0, other.clone(), "gemm");
        assert!(store.is_empty(), "{field}");
        assert_eq!(store.warnings().len(), 1, "{field}");
        let warning = &store.warnings()[0];
        assert!(warning.contains("stale"), "{warning}");
        assert!(warning.contains(field), "{warning}");
        assert!(warning.contains("ignored"), "{warning}");

        store.insert("m8n8k8", "64x64").unwrap();
        let reopened = TuneStore::open_in(&dir.0, other, "gemm");
        assert!(reopened.warnings().is_empty(), "{field}: {reopened:?}");
        assert_eq!(reopened.len(), 1, "{field}");
        assert_eq!(reopened.get("m8n8k8"), Some("64x64"));
        let original = open(&dir);
        assert!(original.is_empty() && original.warnings()[0].contains("stale"));
    }
}

#[test]
fn key_fields_with_tabs_and_newlines_round_trip() {
    let dir = TempDir::new();
    let odd = TuneKey {
        device: "GPU\twith\\tabs\nand\rbreaks".into(),
        ..key()
    };
    let mut store = TuneStore::open_in(&dir.0, odd.clone(), "gemm");
    store.insert("c", "w").unwrap();
    let reopened = TuneStore::open_in(&dir.0, odd, "gemm");
    assert!(reopened.warnings().is_empty(), "{reopened:?}");
    assert_eq!(reopened.get("c"), Some("w"));
    assert!(open(&dir).warnings()[0].contains("stale"));
}

#[test]
fn truncated_file_is_ignored() {
    let dir = TempDir::new();
    let bytes = written(&dir);
    for len in 0..bytes.len() {
        assert_ignored(&bytes[..len], &format!("cut to {len} bytes"));
    }
}

#[test]
fn flipped_bit_is_ignored() {
    let dir = TempDir::new();
    let bytes = written(&dir);
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1 << bit;
            assert_ignored(&flipped, &format!("byte {i} bit {bit} flipped"));
        }
    }
}

#[test]
fn corrupt_files_are_ignored() {
    let header = header();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("garbage", b"\x00\xff garbage \x7f\n\n\t".to_vec()),
        ("no checksum", format!("{header}c\tw\n").into_bytes()),
        (
            "wrong checksum",
            format!("{header}c\tw\nfnv1a64\t0123456789abcdef\n").into_bytes(),
        ),
        (
            "short checksum",
            format!("{header}c\tw\nfnv1a64\t12\n").into_bytes(),
        ),
        ("no tab", with_checksum(format!("{header}c w\n").as_bytes())),
        (
            "empty class",
            with_checksum(format!("{header}\tw\n").as_bytes()),
        ),
        (
            "two tabs",
            with_checksum(format!("{header}c\tw\tx\n").as_bytes()),
        ),
        (
            "repeated class",
            with_checksum(format!("{header}c\tw\nc\tv\n").as_bytes()),
        ),
        (
            "blank line",
            with_checksum(format!("{header}\n").as_bytes()),
        ),
        ("no header", with_checksum(b"")),
        (
            "other magic",
            with_checksum(b"other-tune\t1\tNVIDIA H200\t12080\t0.1.0\n"),
        ),
        (
            "other version",
            with_checksum(header.replacen("\t1\t", "\t2\t", 1).as_bytes()),
        ),
        (
            "four fields",
            with_checksum(b"pagesift-gpu-tune\t1\tNVIDIA H200\t12080\n"),
        ),
        (
            "bad driver",
            with_checksum(header.replacen("12080", "12.8", 1).as_bytes()),
        ),
        (
            "bad escape",
            with_checksum(header.replacen("NVIDIA", "NV\\qIDIA", 1).as_bytes()),
        ),
        (
            "not UTF-8",
            with_checksum(&[header.as_bytes(), b"c\t\xff\n"].concat()),
        ),
    ];
    for (what, bytes) in cases {
        assert_ignored(&bytes, what);
    }
}

#[test]
fn corrupt_file_is_replaced_by_insert() {
    let dir = TempDir::new();
    fs::write(dir.file(), b"garbage").unwrap();
    let mut store = open(&dir);
    assert!(store.warnings()[0].contains("ignored"));
    store.insert("c", "w").unwrap();
    let reopened = open(&dir);
    assert!(reopened.warnings().is_empty());
    assert_eq!(reopened.get("c"), Some("w"));
}

#[test]
fn invalid_strings_are_rejected() {
    let dir = TempDir::new();
    let mut store = open(&dir);
    store.insert("c", "w").unwrap();
    for (class, winner) in [
        ("c\t1", "w"),
        ("c\n", "w"),
        ("", "w"),
        ("c\r", "w"),
        ("c\u{7}", "w"),
        ("c", "w\tx"),
        ("c", "w\n"),
        ("c", ""),
        ("c", "\u{85}"),
    ] {
        let e = store.insert(class, winner).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(a) if a.op == "tune::TuneStore::insert"),
            "{e}"
        );
        assert_eq!(store.get("c"), Some("w"), "the store is unchanged");
    }
    assert_eq!(open(&dir).get("c"), Some("w"));
}

/// The directory is a regular file: insert fails with an I/O error naming the path, and keeps
/// the entry in memory.
#[test]
fn unwritable_location_is_an_error() {
    let dir = TempDir::new();
    let not_a_dir = dir.0.join("file");
    fs::write(&not_a_dir, b"").unwrap();
    let mut store = TuneStore::open_in(&not_a_dir, key(), "gemm");
    let e = store.insert("c", "w").unwrap_err();
    let Error::Io(io) = &e else { panic!("{e}") };
    assert!(io.path.starts_with(&not_a_dir), "{e}");
    let message = e.to_string();
    assert!(
        message.starts_with("tune::TuneStore::insert could not"),
        "{e}"
    );
    assert!(message.contains(&not_a_dir.display().to_string()), "{e}");
    assert_eq!(store.get("c"), Some("w"));
}

#[test]
fn table_names_are_validated() {
    for table in ["", "Gemm", "../gemm", "gemm.v2", "a b", "gemm/x", "é"] {
        let dir = TempDir::new();
        let mut store = TuneStore::open_in(&dir.0, key(), table);
        assert_eq!(store.path(), None, "{table:?}");
        assert!(store.warnings()[0].contains("table"), "{table:?}");
        store.insert("c", "w").unwrap();
        assert_eq!(store.get("c"), Some("w"));
        assert_eq!(fs::read_dir(&dir.0).unwrap().count(), 0, "{table:?}");
    }
    let dir = TempDir::new();
    let store = TuneStore::open_in(&dir.0, key(), "gemm_f16-2");
    assert_eq!(
        store.path(),
        Some(dir.0.join("gemm_f16-2-tune.txt").as_path())
    );
    assert!(store.warnings().is_empty());
}

#[test]
fn in_memory_store_writes_nothing() {
    let mut store = TuneStore::in_memory(key());
    store.insert("c", "w").unwrap();
    assert_eq!(store.get("c"), Some("w"));
    assert_eq!(store.path(), None);
    assert!(store.warnings().is_empty());
}

#[test]
fn cache_dir_precedence() {
    let some = |s: &str| Some(OsString::from(s));
    let all = cache_dir_from(some("/c"), some("/x"), some("/h"));
    assert_eq!(all, Some(PathBuf::from("/c")));
    let xdg = cache_dir_from(some(""), some("/x"), some("/h"));
    assert_eq!(xdg, Some(PathBuf::from("/x/pagesift-gpu")));
    let home = cache_dir_from(None, some(""), some("/h"));
    assert_eq!(home, Some(PathBuf::from("/h/.cache/pagesift-gpu")));
    let relative_xdg = cache_dir_from(None, some("cache"), some("/h"));
    assert_eq!(relative_xdg, Some(PathBuf::from("/h/.cache/pagesift-gpu")));
    assert_eq!(cache_dir_from(None, None, some("")), None);
    assert_eq!(cache_dir_from(None, None, None), None);
}

#[test]
fn escapes_round_trip() {
    for field in ["", "NVIDIA H200", "a\\b\tc\nd\re", "\\t", "trailing\\"] {
        assert_eq!(unescape(&escape(field)).as_deref(), Some(field));
        assert!(!escape(field).contains(['\t', '\n', '\r']));
    }
    assert_eq!(unescape("a\\"), None);
    assert_eq!(unescape("\\x"), None);
}
