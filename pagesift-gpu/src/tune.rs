//! A file store of autotune winners: for each shape class of an op, the name of the kernel
//! candidate that ran fastest on this device, e.g. `mma128x64/k3`.
//!
//! An op that tunes (opt-in) times its valid candidates once per shape class and records the
//! winner with [`TuneStore::insert`]; the next process reads it back with [`TuneStore::get`]
//! instead of timing again. Entries are names only: a winner read back is a hint, and the op
//! checks it against the shape before use.
//!
//! # Where the file lives
//!
//! One file per table, `<dir>/<table>-tune.txt` (`gemm-tune.txt`), where `<dir>` is
//! [`cache_dir`]: `PAGESIFT_GPU_CACHE_DIR` if set and non-empty, else
//! `$XDG_CACHE_HOME/pagesift-gpu`, else `$HOME/.cache/pagesift-gpu`. With none of them
//! [`TuneStore::open`] gives a store in memory only. [`TuneStore::open_in`] takes the directory.
//!
//! # Format
//!
//! UTF-8 text, fields separated by a tab (`\t` below), every line ending in `\n`:
//!
//! ```text
//! pagesift-gpu-tune\t1\tNVIDIA H200\t12080\t0.1.0
//! m1n4096k4096\t128x128
//! m4096n4096k4096\tmma128x64/k3
//! fnv1a64\t26b38f1c2e45044f
//! ```
//!
//! The header holds the format version and the [`TuneKey`]: device name, driver version and
//! crate version, in which a backslash, tab, newline and carriage return are written as `\\`,
//! `\t`, `\n` and `\r`. Then one `class\twinner` line per entry, sorted by class. The last
//! line is the FNV-1a 64-bit hash of every byte before it, in 16 lowercase hex digits, so a
//! truncated or edited file is detected.
//!
//! # Stale and corrupt files
//!
//! A file is trusted whole or not at all. One whose key differs from the store's (another
//! device, driver or crate version) is stale; one that does not parse (a bad checksum, cut
//! short, another format version, a line without a tab) is corrupt. Either is ignored with a
//! warning ([`TuneStore::warnings`], also printed to stderr), the store starts empty, and its
//! next [`TuneStore::insert`] replaces the file.
//!
//! An insert writes the whole table to a temporary file in the same directory and renames it
//! over the old one, so a reader never sees half a file. Of two processes writing one table at
//! once the last rename wins; the other's new entries are lost and tuned again later.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{InvalidArgument, Io};
use crate::Result;

/// The first field of the header.
const MAGIC: &str = "pagesift-gpu-tune";
/// The format version this build reads and writes.
const FORMAT_VERSION: &str = "1";
/// The first field of the checksum line.
const CHECKSUM: &str = "fnv1a64";
const INSERT: &str = "tune::TuneStore::insert";

/// What a tune file belongs to. A file is used only if its key equals the store's in every
/// field, since a winner on one device, driver or crate version says little about another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneKey {
    /// The device name the driver reports, e.g. `NVIDIA H200`.
    pub device: String,
    /// The driver version as `cuDriverGetVersion` reports it, e.g. `12080` for 12.8.
    pub driver: i32,
    /// The pagesift-gpu version, whose kernel candidates the names refer to.
    pub crate_version: String,
}

impl TuneKey {
    /// The key of `device` under driver version `driver`, for this crate's version.
    pub fn new(device: impl Into<String>, driver: i32) -> Self {
        TuneKey {
            device: device.into(),
            driver,
            crate_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// One table of autotune winners, `class -> winner`, kept in memory and in a file (see the
/// [module](self) docs).
#[derive(Debug)]
pub struct TuneStore {
    key: TuneKey,
    /// `None` for a store in memory only.
    path: Option<PathBuf>,
    entries: BTreeMap<String, String>,
    warnings: Vec<String>,
}

impl TuneStore {
    /// Opens `table` in [`cache_dir`], or, with no cache directory, a store in memory only.
    /// See [`TuneStore::open_in`].
    pub fn open(key: TuneKey, table: &str) -> Self {
        match cache_dir() {
            Some(dir) => Self::open_in(&dir, key, table),
            None => Self::in_memory(key),
        }
    }

    /// Opens `table`, the file `<dir>/<table>-tune.txt`, and reads its entries if its key is
    /// `key`. Never fails: a missing file gives an empty store; a stale, corrupt or unreadable
    /// one an empty store and a warning (see [`TuneStore::warnings`]). The directory is created
    /// by the first insert.
    ///
    /// `table` must match `[a-z0-9_-]+`; any other name gives a store in memory only, with a
    /// warning.
    pub fn open_in(dir: &Path, key: TuneKey, table: &str) -> Self {
        let mut store = Self::in_memory(key);
        if !valid_table(table) {
            store.warn(format!(
                "invalid table name {table:?} (expected [a-z0-9_-]+); the store is in memory only"
            ));
            return store;
        }
        let path = dir.join(format!("{table}-tune.txt"));
        match fs::read(&path) {
            Ok(bytes) => match parse(&bytes, &store.key) {
                Ok(entries) => store.entries = entries,
                Err(Rejected::Corrupt(reason)) => store.warn(format!(
                    "{}: ignored: {reason}; the store starts empty",
                    path.display()
                )),
                Err(Rejected::Stale(fields)) => store.warn(format!(
                    "{}: stale ({fields}); ignored, the next insert replaces it",
                    path.display()
                )),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => store.warn(format!(
                "{}: could not be read ({e}); ignored",
                path.display()
            )),
        }
        store.path = Some(path);
        store
    }

    fn in_memory(key: TuneKey) -> Self {
        TuneStore {
            key,
            path: None,
            entries: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }

    fn warn(&mut self, message: String) {
        eprintln!("pagesift-gpu tune: {message}");
        self.warnings.push(message);
    }

    /// The winner recorded for `class`.
    ///
    /// A winner read from the file is a hint: the caller must check that it is a valid
    /// candidate for the shape (a file can name a kernel this build no longer has, or one that
    /// another shape of the same class cannot use).
    pub fn get(&self, class: &str) -> Option<&str> {
        self.entries.get(class).map(String::as_str)
    }

    /// Records `winner` for `class`, replacing any earlier winner, and writes the whole table
    /// to the file (creating its directory), unless the store is in memory only.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidArgument`] if `class` or `winner` is empty or holds a control
    /// character (a tab, a newline); the store is unchanged. [`crate::Error::Io`] if the file
    /// could not be written; the entry is kept in memory all the same, and the next successful
    /// insert writes it too.
    pub fn insert(&mut self, class: &str, winner: &str) -> Result<()> {
        for (what, value) in [("class", class), ("winner", winner)] {
            check_name(value).map_err(|reason| InvalidArgument {
                op: INSERT,
                message: format!("{what} {value:?} {reason}"),
            })?;
        }
        self.entries.insert(class.to_owned(), winner.to_owned());
        match &self.path {
            Some(path) => write_atomic(path, &render(&self.key, &self.entries)),
            None => Ok(()),
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the store has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file of the store; `None` for a store in memory only.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The warnings of opening the store (a stale, corrupt or unreadable file, an invalid table
    /// name), each also printed to stderr as `pagesift-gpu tune: <message>`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// The directory of the tune files: `PAGESIFT_GPU_CACHE_DIR` if set and non-empty, else
/// `$XDG_CACHE_HOME/pagesift-gpu` if that is an absolute path, else
/// `$HOME/.cache/pagesift-gpu` if `HOME` is set and non-empty, else `None`.
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(
        std::env::var_os("PAGESIFT_GPU_CACHE_DIR"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`cache_dir`] from the values of its three variables.
fn cache_dir_from(
    cache: Option<OsString>,
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(dir) = cache.filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    // The XDG base directory spec says to ignore a relative (or empty) XDG_CACHE_HOME.
    if let Some(xdg) = xdg.map(PathBuf::from).filter(|d| d.is_absolute()) {
        return Some(xdg.join("pagesift-gpu"));
    }
    let home = home.filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".cache").join("pagesift-gpu"))
}

fn valid_table(table: &str) -> bool {
    !table.is_empty()
        && table
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}

/// Why a class or winner cannot be stored, if it cannot.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("is empty")
    } else if name.chars().any(char::is_control) {
        Err("holds a control character (a tab, a newline)")
    } else {
        Ok(())
    }
}

/// The text of the file for `key` and `entries`.
fn render(key: &TuneKey, entries: &BTreeMap<String, String>) -> String {
    let mut text = format!(
        "{MAGIC}\t{FORMAT_VERSION}\t{}\t{}\t{}\n",
        escape(&key.device),
        key.driver,
        escape(&key.crate_version)
    );
    for (class, winner) in entries {
        text.push_str(class);
        text.push('\t');
        text.push_str(winner);
        text.push('\n');
    }
    let checksum = fnv1a64(text.as_bytes());
    text.push_str(&format!("{CHECKSUM}\t{checksum:016x}\n"));
    text
}

/// Writes `text` to a temporary file beside `path`, then renames it to `path`.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    // The counter keeps two stores of one process from sharing a temporary file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let io = |action, path: &Path, source| Io {
        op: INSERT,
        action,
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| io("create the directory", dir, e))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    let written = fs::write(&tmp, text)
        .map_err(|e| io("write", &tmp, e))
        .and_then(|()| fs::rename(&tmp, path).map_err(|e| io("rename into place", path, e)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(Into::into)
}

/// Why a file's contents were not used.
#[derive(Debug)]
enum Rejected {
    /// It does not parse; the reason.
    Corrupt(String),
    /// It parses but belongs to another key; the fields that differ.
    Stale(String),
}

/// The entries of a file's bytes if they are a valid file for `key`.
fn parse(bytes: &[u8], key: &TuneKey) -> Result<BTreeMap<String, String>, Rejected> {
    let corrupt = |reason: &str| Rejected::Corrupt(reason.to_owned());
    if bytes.is_empty() {
        return Err(corrupt("the file is empty"));
    }
    let Some(lines) = bytes.strip_suffix(b"\n") else {
        return Err(corrupt("its last line is cut short"));
    };
    let body_len = lines.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let (body, last) = (&bytes[..body_len], &lines[body_len..]);
    let expected = format!("{CHECKSUM}\t{:016x}", fnv1a64(body));
    if last != expected.as_bytes() {
        return Err(corrupt(if last.starts_with(CHECKSUM.as_bytes()) {
            "the checksum does not match"
        } else {
            "it does not end in a checksum line"
        }));
    }
    let body = std::str::from_utf8(body).map_err(|_| corrupt("it is not UTF-8"))?;
    let mut lines = body.split_terminator('\n');
    check_header(lines.next().unwrap_or(""), key)?;
    let mut entries = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let number = i + 2;
        let Some((class, winner)) = line.split_once('\t') else {
            return Err(Rejected::Corrupt(format!("line {number} has no tab")));
        };
        if check_name(class).is_err() || check_name(winner).is_err() {
            return Err(Rejected::Corrupt(format!(
                "line {number} is not `class<TAB>winner`"
            )));
        }
        if entries
            .insert(class.to_owned(), winner.to_owned())
            .is_some()
        {
            return Err(Rejected::Corrupt(format!(
                "line {number} repeats class {class:?}"
            )));
        }
    }
    Ok(entries)
}

/// Checks the header line: the format, then the key field by field.
fn check_header(header: &str, key: &TuneKey) -> Result<(), Rejected> {
    let corrupt = |reason: String| Rejected::Corrupt(reason);
    let fields: Vec<&str> = header.split('\t').collect();
    if fields[0] != MAGIC {
        return Err(corrupt(
            "its header is not a pagesift-gpu tune header".into(),
        ));
    }
    // The version before the field count: another version may have other fields.
    match fields.get(1) {
        Some(&FORMAT_VERSION) => {}
        version => {
            return Err(corrupt(format!(
                "format version {:?}, this build reads {FORMAT_VERSION}",
                version.unwrap_or(&"")
            )))
        }
    }
    let [_, _, device, driver, crate_version] = fields[..] else {
        return Err(corrupt(format!(
            "its header has {} fields, not 5",
            fields.len()
        )));
    };
    let device = unescape(device).ok_or_else(|| corrupt("a bad escape in the device".into()))?;
    let driver: i32 = driver
        .parse()
        .map_err(|_| corrupt(format!("driver version {driver:?} is not a number")))?;
    let crate_version = unescape(crate_version)
        .ok_or_else(|| corrupt("a bad escape in the crate version".into()))?;
    let mut differ = Vec::new();
    if device != key.device {
        differ.push(format!("device {device:?}, here {:?}", key.device));
    }
    if driver != key.driver {
        differ.push(format!("driver {driver}, here {}", key.driver));
    }
    if crate_version != key.crate_version {
        differ.push(format!(
            "crate version {crate_version:?}, here {:?}",
            key.crate_version
        ));
    }
    if differ.is_empty() {
        Ok(())
    } else {
        Err(Rejected::Stale(format!(
            "written for {}",
            differ.join("; ")
        )))
    }
}

/// A key field with `\`, tab, newline and carriage return as backslash escapes.
fn escape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    for c in field.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The inverse of [`escape`]; `None` for an escape it does not write.
fn unescape(field: &str) -> Option<String> {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '\\' => '\\',
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            _ => return None,
        });
    }
    Some(out)
}

/// The 64-bit FNV-1a hash. Each byte step is a bijection of the state, so two inputs of one
/// length that differ in a single byte always hash apart.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
