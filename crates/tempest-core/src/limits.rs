//! Limits on what a model file, a data file or a setting may ask for, and
//! the memory check that every large allocation passes before it is made.
//!
//! Every recursion over user input is bounded by a limit below, checked
//! before the recursion starts; every allocation whose size the input
//! decides is checked against the memory this machine has with
//! [`check_memory`]. `docs/language.md` ("Limits") lists them for users.

use crate::error::{Error, ErrorKind};

/// The deepest nesting of brackets and `if` expressions in a model file.
pub const MAX_NESTING: usize = 100;

/// The most operators one expression may hold.
pub const MAX_OPERATORS: usize = 1000;

/// The deepest expression tree (operators, calls, indexing and `if`s
/// counted together). Every stage after parsing recurses over expression
/// trees, so this bounds their stack use.
pub const MAX_EXPR_DEPTH: usize = 1000;

/// The most items a range may expand to (`dims = 0..9`, `"x1".."x30"`).
pub const MAX_RANGE_LEN: usize = 1_000_000;

/// The most parser steps per byte of model text (plus a fixed allowance);
/// a guard that keeps parsing time linear in the size of the file.
pub const PARSER_STEPS_PER_BYTE: usize = 400;

/// The largest model file read, in bytes.
pub const MAX_MODEL_BYTES: u64 = 16 << 20;

/// The largest saved fit `tempest predict` reads (a fit with M = 1,000
/// inducing points and 26 latent GPs is about 500 MB of JSON).
pub const MAX_FIT_BYTES: u64 = 1 << 30;

/// Stack left below which a recursive stage continues on a new segment.
const RED_ZONE: usize = 256 << 10;

/// The size of each new stack segment.
const STACK_SEGMENT: usize = 8 << 20;

/// Run one level of a recursion over user input (expression trees) with
/// room to spare: when the thread's stack runs low, `f` continues on a
/// freshly allocated segment. The depth limits above bound how many
/// segments a recursion can need, so this holds on any thread, whatever its
/// stack size.
#[inline]
pub fn deep<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, f)
}

/// Bytes of memory this machine can give to one request: the available
/// memory (`MemAvailable`), lowered to the room left under a cgroup limit
/// when there is one. `None` where it cannot be read (not Linux).
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())?;
    let mut avail = kb.saturating_mul(1024);
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    if let (Some(max), Some(cur)) = (
        read("/sys/fs/cgroup/memory.max"),
        read("/sys/fs/cgroup/memory.current"),
    ) {
        avail = avail.min(max.saturating_sub(cur));
    }
    Some(avail)
}

/// Requests up to this many bytes are granted without reading the free
/// memory (so checks in evaluation paths cost nothing), unless a smaller
/// budget is set with [`MEMORY_VAR`].
const SMALL_REQUEST: u128 = 64 << 20;

/// The memory assumed available where it cannot be read.
const FALLBACK_MEMORY: u64 = 8 << 30;

/// The environment variable that sets a memory budget below what the
/// machine has: `TEMPEST_MEMORY=4GB` (units `kB`, `MB`, `GB`, `TB`, powers
/// of 1000; a plain number is bytes). Every request is checked against the
/// smaller of the two.
pub const MEMORY_VAR: &str = "TEMPEST_MEMORY";

/// The budget set with [`MEMORY_VAR`], if any (read once, when first
/// asked); an error naming the variable when its value is not a byte count
/// (the command line and `tempest::bind` check it before any work;
/// [`check_memory`] ignores a budget that cannot be read).
pub fn memory_budget() -> Result<Option<u64>, Error> {
    static BUDGET: std::sync::OnceLock<Result<Option<u64>, String>> = std::sync::OnceLock::new();
    BUDGET
        .get_or_init(|| {
            let Ok(text) = std::env::var(MEMORY_VAR) else {
                return Ok(None);
            };
            parse_bytes(&text).map(Some).ok_or(format!(
                "{MEMORY_VAR}={text}: expected a number of bytes, e.g. `4GB`, `500MB` or `1000000`"
            ))
        })
        .clone()
        .map_err(|m| Error::new(ErrorKind::Settings, m))
}

/// `4GB`, `500 MB`, `1.5TB`, `1000000` (bytes); units are powers of 1000.
fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        _ => return None,
    };
    let v = num.parse::<f64>().ok()? * scale;
    (v.is_finite() && v >= 0.0 && v < u64::MAX as f64).then_some(v as u64)
}

/// A byte count in words: `812 bytes`, `3.1 MB`, `8.0 TB`.
pub fn bytes_in_words(b: u128) -> String {
    const UNITS: [&str; 6] = ["bytes", "kB", "MB", "GB", "TB", "PB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A request for memory: the number of f64 values (or other 8-byte
/// entries) a piece of work needs and how that number comes about.
#[derive(Clone, Debug)]
pub struct Request {
    /// What needs the memory ("the draws", "the kernel matrix K").
    pub what: String,
    /// The factors whose product is the number of entries, with their
    /// names: `[("chains", 4), ("draws", 1000), ("columns", 62)]`.
    pub factors: Vec<(String, u128)>,
    /// Bytes per entry.
    pub bytes_per_entry: u128,
}

impl Request {
    /// A request for `what`: the product of `factors`, 8 bytes each.
    pub fn new(what: impl Into<String>) -> Request {
        Request {
            what: what.into(),
            factors: Vec::new(),
            bytes_per_entry: 8,
        }
    }
    /// Multiply by a named factor.
    pub fn times(mut self, name: impl Into<String>, n: impl TryInto<u128>) -> Request {
        self.factors
            .push((name.into(), n.try_into().unwrap_or(u128::MAX)));
        self
    }
    /// Set the bytes per entry (8 unless set).
    pub fn bytes_each(mut self, bytes: u128) -> Request {
        self.bytes_per_entry = bytes;
        self
    }
    /// The bytes asked for (saturating).
    pub fn bytes(&self) -> u128 {
        self.factors
            .iter()
            .fold(self.bytes_per_entry, |a, (_, n)| a.saturating_mul(*n))
    }
    /// The product written out: `4 chains × 1000 draws × 62 columns × 8 bytes`
    /// (the bytes per entry left out when the factors count bytes).
    pub fn formula(&self) -> String {
        let mut parts: Vec<String> = self
            .factors
            .iter()
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        if self.bytes_per_entry != 1 {
            parts.push(format!("{} bytes", self.bytes_per_entry));
        }
        parts.join(" × ")
    }
}

/// Refuse a request for more memory than this machine has available, or
/// than the budget set with [`MEMORY_VAR`] (several requests of one piece
/// of work are added up). The error says what needs the memory, how much
/// (as a product of the sizes involved) and how much there is.
pub fn check_memory(requests: &[Request]) -> Result<(), Error> {
    let total: u128 = requests
        .iter()
        .fold(0u128, |a, r| a.saturating_add(r.bytes()));
    // An unreadable budget is refused where work starts (`tempest::bind`,
    // the command line), not here, where the error would be located at
    // whatever asked for memory.
    let budget = memory_budget().ok().flatten();
    // Small requests pass without asking the system.
    if total <= SMALL_REQUEST && budget.is_none_or(|b| total <= b as u128) {
        return Ok(());
    }
    let avail = available_memory();
    let limit = match (avail, budget) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(FALLBACK_MEMORY),
    } as u128;
    if total <= limit {
        return Ok(());
    }
    let biggest = requests
        .iter()
        .max_by_key(|r| r.bytes())
        .cloned()
        .unwrap_or_else(|| Request::new("this run"));
    let have = match (avail, budget) {
        (_, Some(b)) if b as u128 == limit => format!(
            "the budget set with {MEMORY_VAR} is {}",
            bytes_in_words(limit)
        ),
        (Some(_), _) => format!("this machine has {} available", bytes_in_words(limit)),
        (None, _) => format!(
            "tempest assumes at most {} where the free memory cannot be read",
            bytes_in_words(limit)
        ),
    };
    let mut e = Error::new(
        ErrorKind::Settings,
        format!(
            "{} would need {} of memory ({}); {have}",
            biggest.what,
            bytes_in_words(biggest.bytes()),
            biggest.formula()
        ),
    );
    if requests.len() > 1 {
        e = e.with_note(format!(
            "with everything else this run keeps in memory: {} in all",
            bytes_in_words(total)
        ));
    }
    Err(e)
}

/// Refuse an integer setting or size above `max`, naming it.
pub fn at_most(what: &str, value: usize, max: usize) -> Result<(), Error> {
    if value > max {
        return Err(Error::new(
            ErrorKind::Settings,
            format!("{what} is {value}; at most {max} is supported"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_multiply_and_saturate() {
        let r = Request::new("x").times("a", 4u64).times("b", 1000u64);
        assert_eq!(r.bytes(), 32_000);
        assert_eq!(r.formula(), "4 a × 1000 b × 8 bytes");
        let huge = Request::new("y")
            .times("a", u64::MAX)
            .times("b", u64::MAX)
            .times("c", u64::MAX);
        assert_eq!(huge.bytes(), u128::MAX);
    }

    #[test]
    fn absurd_requests_are_refused_with_the_sizes() {
        let r = Request::new("the draws")
            .times("chains", 4u64)
            .times("draws", 1_000_000_000_000u64)
            .times("columns", 32u64);
        let e = check_memory(&[r]).unwrap_err();
        assert!(
            e.message.contains("the draws would need 1.0 PB"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("4 chains × 1000000000000 draws × 32 columns × 8 bytes")
        );
        assert!(check_memory(&[Request::new("small").times("n", 10u64)]).is_ok());
    }

    #[test]
    fn byte_counts_parse_with_units() {
        assert_eq!(parse_bytes("4GB"), Some(4_000_000_000));
        assert_eq!(parse_bytes(" 500 MB "), Some(500_000_000));
        assert_eq!(parse_bytes("1.5kB"), Some(1500));
        assert_eq!(parse_bytes("1000000"), Some(1_000_000));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("4 PB"), None);
        assert_eq!(parse_bytes("-1"), None);
    }

    #[test]
    fn byte_counts_read_well() {
        assert_eq!(bytes_in_words(812), "812 bytes");
        assert_eq!(bytes_in_words(3_100_000), "3.1 MB");
        assert_eq!(bytes_in_words(8_000_000_000_000), "8.0 TB");
    }
}
