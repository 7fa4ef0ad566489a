//! The gateway's logs: stderr, one record per line, plain text or JSON (`Logging.Format`).
//!
//! Which records: `RUST_LOG` when it is set (and not empty); else `-v`/`-vv`/`-vvv` on the command
//! line; else, for `serve`, `Logging.Level` from the configuration; else the command's default:
//! `info,rmcp=warn` for `serve`, `warn` for the one-shot commands (`validate`, `apps`,
//! `module-info`, `boundary-check`), whose result is what they print on stdout.
//!
//! The `log` bridge is installed too, because the module's records arrive through it with their
//! own targets (`mcpapp_plugin::…`, see `module/host.rs`): they come out in the same format.
//!
//! The configuration is read before this runs (the format comes from it), so a problem with the
//! `Logging` section is kept in [`LogSetup::problems`] and logged by [`init`] once the
//! subscriber is in place.
//!
//! **One record, one line.** Records carry what arrived from outside (ids, URLs, commands, header
//! and variable names, tool arguments, an app's own log lines through the module), so no control
//! character of theirs reaches stderr: a newline in an id would forge a line of its own, an ESC
//! would restyle the operator's terminal. Two places see to it. In the plain format the fields
//! (the message among them) are escaped as they are written ([`EscapedFields`]: `\n`, `\u{1b}`),
//! before the formatter adds its own colours; then every record passes [`EscapingWriter`] on its
//! way out, which escapes any control character left (in a target, a span) except the record's
//! final newline and, on a terminal, the formatter's colour sequences. The JSON format escapes
//! C0 controls inside its strings itself; the writer escapes the rest there (DEL, C1, U+2028/9) as
//! JSON `\u00XX` escapes, so a record stays one line of valid JSON.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;

use tracing_subscriber::field::{RecordFields, VisitOutput as _};
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};
use tracing_subscriber::fmt::{FormatFields, MakeWriter};

use crate::config::settings::Settings;

/// How each record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `2026-01-02T03:04:05.678Z  INFO target: message`, coloured on a terminal.
    Plain,
    /// One JSON object per line: `timestamp`, `level`, `message` and the record's other fields,
    /// `target` (and `span` when inside one).
    Json,
}

/// Which kind of command runs: it decides the default level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The gateway serving: its log is the operator's record of what happened.
    Serve,
    /// A command that prints a result on stdout and exits: logs only what went wrong.
    OneShot,
}

/// The filter of `serve` when nothing else is configured.
pub const SERVE_DEFAULT_FILTER: &str = "info,rmcp=warn";

/// The filters `-v` steps through, from the one-shot default (`warn`) up.
const LEVELS: [&str; 4] = ["warn", "info,rmcp=warn", "debug,rmcp=info", "trace"];

/// What [`init`] installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSetup {
    pub format: Format,
    /// An `EnvFilter` directive string.
    pub filter: String,
    /// Problems with `Logging.*` or `RUST_LOG`, logged as warnings once logging works.
    pub problems: Vec<String>,
}

/// Decides format and filter. `settings` is `None` when the configuration could not be read (the
/// command then reports why); `rust_log` is the `RUST_LOG` variable.
pub fn setup(settings: Option<&Settings>, mode: Mode, verbose: u8, rust_log: Option<&str>) -> LogSetup {
    let mut problems = Vec::new();
    let format = match settings.and_then(|s| s.get_str("Logging:Format")) {
        None => Format::Plain,
        Some(f) if f.eq_ignore_ascii_case("json") => Format::Json,
        Some(f) if f.eq_ignore_ascii_case("plain") || f.eq_ignore_ascii_case("text") => Format::Plain,
        Some(other) => {
            problems.push(format!("Logging.Format '{other}' is not \"plain\" or \"json\"; writing plain text"));
            Format::Plain
        }
    };
    let default = match mode {
        Mode::Serve => SERVE_DEFAULT_FILTER.to_string(),
        Mode::OneShot => LEVELS[0].to_string(),
    };
    let filter = if let Some(env) = rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        match parse(env) {
            Ok(()) => env.to_string(),
            Err(e) => {
                problems.push(format!("RUST_LOG '{env}' is not a valid filter ({e}); using {default}"));
                default
            }
        }
    } else if verbose > 0 {
        let base = if mode == Mode::Serve { 1 } else { 0 };
        LEVELS[(base + usize::from(verbose)).min(LEVELS.len() - 1)].to_string()
    } else if let Some(level) = settings.and_then(|s| s.get_str("Logging:Level")).filter(|_| mode == Mode::Serve) {
        let directive = level_name(&level).map(str::to_string).unwrap_or(level.clone());
        match parse(&directive) {
            Ok(()) => directive,
            Err(e) => {
                problems.push(format!("Logging.Level '{level}' is not a level or a RUST_LOG-style filter ({e}); using {default}"));
                default
            }
        }
    } else {
        default
    };
    LogSetup { format, filter, problems }
}

/// ASP.NET's level names (what an `appsettings.json` author may write), as `tracing` levels.
fn level_name(level: &str) -> Option<&'static str> {
    Some(match level.trim().to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "information" | "info" => "info",
        "warning" | "warn" => "warn",
        "error" | "critical" => "error",
        "none" | "off" => "off",
        _ => return None,
    })
}

fn parse(directives: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::builder().parse(directives).map(drop).map_err(|e| e.to_string())
}

/// Installs the subscriber (and the `log` bridge) and logs the setup's problems.
pub fn init(setup: &LogSetup) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    subscriber(setup, std::io::stderr().is_terminal(), std::io::stderr).init();
    for problem in &setup.problems {
        tracing::warn!("{problem}");
    }
}

/// The subscriber [`init`] installs, writing to `out`; `colours` when `out` is a terminal.
fn subscriber<W>(setup: &LogSetup, colours: bool, out: W) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::builder().parse(&setup.filter).unwrap_or_else(|_| EnvFilter::new(SERVE_DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let quiet = QuietAnswers::for_filter(&setup.filter);
    match setup.format {
        Format::Plain => Box::new(
            builder
                .fmt_fields(EscapedFields)
                .with_ansi(colours)
                .with_writer(EscapingWriter { out, escaping: Escaping::Plain { keep_colours: colours } })
                .finish()
                .with(quiet),
        ),
        Format::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_span_list(false)
                .with_ansi(false)
                .with_writer(EscapingWriter { out, escaping: Escaping::Json })
                .finish()
                .with(quiet),
        ),
    }
}

/// Leaves out rmcp's warnings about answers. rmcp logs at warn every error a handler answers
/// ("response error") and every request it turns away ("rejected peer request"): a client asking
/// for a prompt that does not exist on `/mcp`, an app asking for roots when no client of the
/// gateway waits (the module's rmcp, whose records arrive through the `log` bridge). Those are
/// answers their peer receives, not faults of the gateway, and anyone who may send a request
/// could fill the operator's warnings with them. A filter that asks for debug or trace records
/// (`-vv`, `RUST_LOG=debug`) keeps them.
struct QuietAnswers;

impl QuietAnswers {
    fn for_filter(filter: &str) -> Option<QuietAnswers> {
        let verbose = filter.contains("debug") || filter.contains("trace");
        (!verbose).then_some(QuietAnswers)
    }
}

/// rmcp's target of both records.
const RMCP_SERVICE: &str = "rmcp::service";

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for QuietAnswers {
    fn event_enabled(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) -> bool {
        let metadata = event.metadata();
        // A record of the `log` bridge has the target "log" here, its own in a field.
        if *metadata.level() != tracing::Level::WARN || !matches!(metadata.target(), RMCP_SERVICE | "log") {
            return true;
        }
        let mut record = AnswerRecord::default();
        event.record(&mut record);
        let target = record.log_target.as_deref().unwrap_or(metadata.target());
        !(target == RMCP_SERVICE && record.about_an_answer)
    }
}

/// What [`QuietAnswers`] reads of a record: its target if it came through the `log` bridge, and
/// whether a message of it (rmcp's "rejected peer request" has two: the peer's and its own)
/// is one of the two.
#[derive(Default)]
struct AnswerRecord {
    about_an_answer: bool,
    log_target: Option<String>,
}

impl AnswerRecord {
    fn message(&mut self, text: &str) {
        self.about_an_answer |= text.starts_with("response error") || text.starts_with("rejected peer request");
    }
}

impl tracing::field::Visit for AnswerRecord {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "message" => self.message(value),
            "log.target" => self.log_target = Some(value.to_string()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message(&format!("{value:?}"));
        }
    }
}

/// How a control character is written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escaping {
    /// As Rust writes it in a string: `\n`, `\r`, `\t`, else `\u{1b}`. With `keep_colours`, a
    /// colour sequence (`ESC [ digits ; … m`, what the formatter writes on a terminal) passes whole.
    Plain { keep_colours: bool },
    /// As a JSON string escape, `\u001b`: the line stays valid JSON meaning the same text.
    Json,
}

/// What may not reach a log line raw: the control characters (C0, DEL, C1) and the two Unicode
/// line breaks (U+2028, U+2029) that some viewers end a line at.
fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// `record` with every character [`needs_escape`] says escaped, but for the one final newline
/// that ends the record. Borrowed when nothing needed escaping, the usual case.
fn escape_record(record: &str, escaping: Escaping) -> Cow<'_, str> {
    match record.strip_suffix('\n') {
        Some(body) => match escape(body, escaping) {
            Cow::Borrowed(_) => Cow::Borrowed(record),
            Cow::Owned(mut escaped) => {
                escaped.push('\n');
                Cow::Owned(escaped)
            }
        },
        None => escape(record, escaping),
    }
}

/// `text` with every character [`needs_escape`] says escaped (a colour sequence kept whole when
/// `escaping` keeps colours).
fn escape(text: &str, escaping: Escaping) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let colour = match escaping {
            Escaping::Plain { keep_colours: true } if c == '\x1b' => colour_sequence_len(rest),
            _ => None,
        };
        let taken = match colour {
            Some(len) => {
                out.push_str(&rest[..len]);
                len
            }
            None => {
                push_escaped(&mut out, c, escaping);
                c.len_utf8()
            }
        };
        rest = &rest[taken..];
    }
    Cow::Owned(out)
}

/// The length of the SGR sequence (`ESC [ 1 ; 31 m`) `text` starts with, if it starts with one.
fn colour_sequence_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes().strip_prefix(b"\x1b[")?;
    let params = bytes.iter().take_while(|b| b.is_ascii_digit() || **b == b';').count();
    (bytes.get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// Appends `c` to `out`, escaped the way `escaping` writes it if it [`needs_escape`].
fn push_escaped(out: &mut String, c: char, escaping: Escaping) {
    use fmt::Write as _;
    if !needs_escape(c) {
        out.push(c);
        return;
    }
    let _ = match (escaping, c) {
        (Escaping::Json, c) => write!(out, "\\u{:04x}", c as u32),
        (Escaping::Plain { .. }, '\n') => write!(out, "\\n"),
        (Escaping::Plain { .. }, '\r') => write!(out, "\\r"),
        (Escaping::Plain { .. }, '\t') => write!(out, "\\t"),
        (Escaping::Plain { .. }, c) => write!(out, "\\u{{{:x}}}", c as u32),
    };
}

/// A [`MakeWriter`] over `out` whose writers hold a record until the formatter is done with it,
/// then write it escaped ([`escape_record`]) in one piece: the record's last newline is known
/// to be its own, however the formatter cut its writes.
struct EscapingWriter<M> {
    out: M,
    escaping: Escaping,
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapingWriter<M> {
    type Writer = RecordWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RecordWriter { record: Vec::new(), out: self.out.make_writer(), escaping: self.escaping }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        RecordWriter { record: Vec::new(), out: self.out.make_writer_for(meta), escaping: self.escaping }
    }
}

/// One record on its way out (see [`EscapingWriter`]).
struct RecordWriter<W: Write> {
    record: Vec<u8>,
    out: W,
    escaping: Escaping,
}

impl<W: Write> Write for RecordWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.record.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for RecordWriter<W> {
    fn drop(&mut self) {
        if self.record.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.record);
        // Nowhere to report a failure to write the log to.
        let _ = self.out.write_all(escape_record(&text, self.escaping).as_bytes());
        let _ = self.out.flush();
    }
}

/// The plain format's fields, written as tracing-subscriber's `DefaultFields` writes them (the
/// message bare, others `name=value`, names in italics on a terminal) but with each value's
/// control characters escaped first — so that the writer, which lets the formatter's colours
/// through on a terminal, is never handed an ESC from a value.
struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = EscapingVisitor(DefaultVisitor::new(writer, true));
        fields.record(&mut visitor);
        visitor.0.finish()
    }
}

/// Renders each value as `DefaultVisitor` would, escapes it, and hands it on to be written.
struct EscapingVisitor<'w>(DefaultVisitor<'w>);

impl tracing::field::Visit for EscapingVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name().starts_with("log.") {
            // The `log` bridge's metadata, which the formatter shows elsewhere and skips here.
            return self.0.record_debug(field, value);
        }
        let text = format!("{value:?}");
        let escaped = escape(&text, Escaping::Plain { keep_colours: false });
        self.0.record_debug(field, &format_args!("{escaped}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"))
        } else {
            self.record_debug(field, &value)
        }
    }

    fn record_error(&mut self, field: &tracing::field::Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        self.record_debug(field, &format_args!("{text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    fn settings(v: serde_json::Value) -> Settings {
        Settings { effective: v, config_dir: PathBuf::from("/cfg") }
    }

    #[test]
    fn defaults_per_command() {
        assert_eq!(setup(None, Mode::Serve, 0, None).filter, "info,rmcp=warn");
        assert_eq!(setup(None, Mode::OneShot, 0, None).filter, "warn");
        assert_eq!(setup(None, Mode::OneShot, 0, Some("  ")).filter, "warn", "an empty RUST_LOG is unset");
        assert_eq!(setup(None, Mode::OneShot, 0, None).format, Format::Plain);
    }

    #[test]
    fn rust_log_wins_then_verbosity_then_the_configured_level() {
        let s = settings(json!({"Logging": {"Level": "debug", "Format": "JSON"}}));
        assert_eq!(setup(Some(&s), Mode::Serve, 2, Some("error")).filter, "error");
        assert_eq!(setup(Some(&s), Mode::OneShot, 1, None).filter, "info,rmcp=warn");
        assert_eq!(setup(Some(&s), Mode::OneShot, 9, None).filter, "trace");
        assert_eq!(setup(Some(&s), Mode::Serve, 1, None).filter, "debug,rmcp=info");
        assert_eq!(setup(Some(&s), Mode::Serve, 0, None).filter, "debug");
        assert_eq!(setup(Some(&s), Mode::OneShot, 0, None).filter, "warn", "Logging.Level is the served gateway's");
        assert_eq!(setup(Some(&s), Mode::Serve, 0, None).format, Format::Json);
        let aspnet = settings(json!({"logging": {"level": "Warning"}}));
        assert_eq!(setup(Some(&aspnet), Mode::Serve, 0, None).filter, "warn");
        let directives = settings(json!({"Logging": {"Level": "info,mcpapp_plugin=debug"}}));
        assert_eq!(setup(Some(&directives), Mode::Serve, 0, None).filter, "info,mcpapp_plugin=debug");
    }

    /// What a subscriber of `format` writes for the records `emit` makes.
    fn written(format: Format, colours: bool, emit: impl FnOnce()) -> String {
        written_as(format, colours, "info", emit)
    }

    /// [`written`] with the filter `filter`.
    fn written_as(format: Format, colours: bool, filter: &str, emit: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Capture(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);
        impl Write for Capture {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let capture = Capture::default();
        let sink = capture.clone();
        let setup = LogSetup { format, filter: filter.into(), problems: Vec::new() };
        tracing::subscriber::with_default(subscriber(&setup, colours, move || sink.clone()), emit);
        let bytes = capture.0.lock().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// rmcp's warnings about answers a peer got are left out at the default level (tracing's own
    /// and the module's, which come through the `log` bridge), kept with debug records; its other
    /// warnings, and anyone's "response error" of another target, stay.
    #[test]
    fn rmcp_warnings_about_answers_are_left_out_unless_debugging() {
        let emit = || {
            tracing::warn!(target: "rmcp::service", id = 2, error = "unknown prompt", "response error");
            tracing::warn!(target: "rmcp::service", id = 3, message = "no", "rejected peer request");
            // As the `log` bridge records the module's (target "log", the real one a field).
            tracing::warn!(target: "log", { log.target = "rmcp::service" }, "response error id=0 error=roots/list is unavailable");
            tracing::warn!(target: "rmcp::service", "Error sending notification");
            tracing::warn!(target: "gateway_host::other", "response error of ours");
        };
        let quiet = written_as(Format::Plain, false, "info,rmcp=warn", emit);
        assert!(!quiet.contains("unknown prompt") && !quiet.contains("rejected") && !quiet.contains("roots/list"), "{quiet}");
        assert!(quiet.contains("Error sending notification") && quiet.contains("response error of ours"), "{quiet}");
        let verbose = written_as(Format::Json, false, "debug,rmcp=info", emit);
        assert!(verbose.contains("unknown prompt") && verbose.contains("rejected") && verbose.contains("roots/list"), "{verbose}");
    }

    /// Text from outside with every kind of line break and terminal control in it.
    const HOSTILE: &str = "app\nFORGED INFO gateway: admin logged in\r\x1b[31mred\x1b]0;title\x07\u{85}\u{2028}\t\x7f end";

    fn assert_one_clean_line(out: &str, colours: bool) {
        let body = out.strip_suffix('\n').unwrap_or_else(|| panic!("no final newline: {out:?}"));
        for (i, c) in body.char_indices() {
            let colour = colours && c == '\x1b' && colour_sequence_len(&body[i..]).is_some();
            assert!(!needs_escape(c) || colour, "a raw {c:?} at {i} in {out:?}");
        }
    }

    #[test]
    fn plain_records_carry_no_control_character_from_their_content() {
        #[derive(Debug, thiserror::Error)]
        #[error("refused: {0}")]
        struct Refused(String);
        for colours in [false, true] {
            let out = written(Format::Plain, colours, || {
                tracing::warn!(url = %HOSTILE, name = HOSTILE, "Workspace MCP server '{HOSTILE}' is not started");
                let error = Refused(HOSTILE.to_string());
                tracing::error!(error = &error as &(dyn std::error::Error + 'static), "failed");
            });
            assert_eq!(out.matches('\n').count(), 2, "two records, two lines: {out:?}");
            for line in out.split_inclusive('\n') {
                assert_one_clean_line(line, colours);
                assert!(!line.starts_with("FORGED"), "{out:?}");
            }
            assert!(out.contains(r"app\nFORGED INFO gateway: admin logged in\r\u{1b}[31mred"), "{out:?}");
            assert!(out.contains(r"\u{85}\u{2028}\t\u{7f} end"), "{out:?}");
            assert_eq!(out.contains('\x1b'), colours, "the formatter's own colours, and only on a terminal: {out:?}");
        }
    }

    #[test]
    fn json_records_stay_one_line_of_json_meaning_the_same_text() {
        let out = written(Format::Json, false, || tracing::warn!(url = %HOSTILE, "{HOSTILE}"));
        assert_one_clean_line(&out, false);
        let record: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(record["message"], HOSTILE, "{out}");
        assert_eq!(record["url"], HOSTILE, "{out}");
    }

    #[test]
    fn escaping_keeps_the_final_newline_and_on_a_terminal_the_colours() {
        let plain = Escaping::Plain { keep_colours: false };
        assert_eq!(escape_record("a\nb\n", plain), "a\\nb\n");
        assert!(matches!(escape_record("calm line\n", plain), Cow::Borrowed(_)));
        assert_eq!(escape_record("x\n\n", plain), "x\\n\n");
        let colours = Escaping::Plain { keep_colours: true };
        assert_eq!(escape_record("\x1b[1;31mERROR\x1b[0m \x1b]0;t\x07\n", colours), "\x1b[1;31mERROR\x1b[0m \\u{1b}]0;t\\u{7}\n");
        assert_eq!(escape_record("\x1b[31", colours), "\\u{1b}[31");
        assert_eq!(escape_record("a\u{2028}b\n", Escaping::Json), "a\\u2028b\n");
    }

    #[test]
    fn bad_values_are_named_and_fall_back() {
        let s = settings(json!({"Logging": {"Level": "loud=[", "Format": "xml"}}));
        let setup = setup(Some(&s), Mode::Serve, 0, None);
        assert_eq!((setup.format, setup.filter.as_str()), (Format::Plain, "info,rmcp=warn"));
        assert_eq!(setup.problems.len(), 2, "{:?}", setup.problems);
        assert!(setup.problems[0].contains("Logging.Format 'xml'"), "{:?}", setup.problems);
        assert!(setup.problems[1].contains("Logging.Level 'loud=['"), "{:?}", setup.problems);
        let bad_env = super::setup(None, Mode::OneShot, 0, Some("foo=[["));
        assert_eq!(bad_env.filter, "warn");
        assert!(bad_env.problems[0].contains("RUST_LOG"), "{:?}", bad_env.problems);
    }
}
