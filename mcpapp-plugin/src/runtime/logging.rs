//! Forwards the module's `tracing` events to the host (SPEC R5).
//!
//! The module library has its own copy of `tracing`'s global dispatcher, so events recorded here
//! would go nowhere unless the module installs a subscriber of its own. That subscriber hands every
//! enabled event to the host's [`HostSink`](host_abi::HostSink) with its target preserved. The sink
//! lives in a global slot so that a module re-created in the same process (libraries are never
//! unloaded) forwards to the newest host sink.
//!
//! Targets are the module's concept names: `mcpapp_plugin::discovery`, not the source folder's
//! `mcpapp_plugin::apps::discovery` ([`public_target`]), so `RUST_LOG` filters and log lines do
//! not depend on how the source is grouped.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use host_abi::{HostSinkBox, LogLevel, LogRecord};
use once_cell::sync::OnceCell;
use parking_lot::RwLock;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::Layer;

static SINK: RwLock<Option<Arc<HostSinkBox>>> = RwLock::new(None);
static INSTALLED: OnceCell<()> = OnceCell::new();

/// Points the module's logs at `sink` (installing the module's subscriber and panic hook on first
/// use; only the exported `create` calls this, never an in-process test).
pub fn install(sink: Arc<HostSinkBox>) {
    *SINK.write() = Some(sink);
    INSTALLED.get_or_init(|| {
        crate::runtime::containment::install_panic_hook();
        let subscriber = tracing_subscriber::registry().with(HostForwardLayer);
        if tracing::subscriber::set_global_default(subscriber).is_err() {
            // Only possible if something else in this library set one first; logs still flow
            // wherever that one sends them.
            eprintln!("mcpapp-plugin: a tracing subscriber was already installed in the module");
        }
    });
}

/// Stops forwarding (used at shutdown so no host code runs after the host dropped its sink).
pub fn uninstall() {
    *SINK.write() = None;
}

fn current_sink() -> Option<Arc<HostSinkBox>> {
    SINK.read().clone()
}

fn level_of(level: &Level) -> LogLevel {
    match *level {
        Level::ERROR => LogLevel::Error,
        Level::WARN => LogLevel::Warn,
        Level::INFO => LogLevel::Info,
        Level::DEBUG => LogLevel::Debug,
        Level::TRACE => LogLevel::Trace,
    }
}

/// The source folders (layers) under the crate root: left out of the targets the host sees.
const LAYERS: &[&str] = &["export", "apps", "upstream", "runtime"];

/// `mcpapp_plugin::apps::discovery` → `mcpapp_plugin::discovery`: a target inside one of this
/// crate's layer folders loses the folder; any other target (explicit ones such as
/// `mcpapp_plugin::app_output`, other crates') is passed as it is.
pub fn public_target(target: &str) -> Cow<'_, str> {
    if let Some((krate, rest)) = target.split_once("::") {
        if krate == env!("CARGO_CRATE_NAME") {
            if let Some((layer, name)) = rest.split_once("::") {
                if LAYERS.contains(&layer) {
                    return Cow::Owned(format!("{krate}::{name}"));
                }
            }
        }
    }
    Cow::Borrowed(target)
}

struct HostForwardLayer;

impl<S: Subscriber> Layer<S> for HostForwardLayer {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        // The host's filter may change at run time, so ask per event.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        match current_sink() {
            Some(sink) => sink.log_enabled(level_of(metadata.level()), public_target(metadata.target()).as_ref().into()),
            None => false,
        }
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let Some(sink) = current_sink() else { return };
        let mut visitor = FieldCollector::default();
        event.record(&mut visitor);
        let meta = event.metadata();
        sink.log(LogRecord {
            level: level_of(meta.level()),
            target: public_target(meta.target()).as_ref().into(),
            message: visitor.message.into(),
            fields_json: Value::Object(visitor.fields).to_string().into(),
        });
    }
}

#[derive(Default)]
struct FieldCollector {
    message: String,
    fields: Map<String, Value>,
}

impl Visit for FieldCollector {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.fields.insert(field.name().to_string(), Value::from(value));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.insert(field.name().to_string(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.insert(field.name().to_string(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields.insert(field.name().to_string(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.fields.insert(field.name().to_string(), Value::from(format!("{value:?}")));
        }
    }
}

/// Runs `f` with `subscriber` as this thread's default, for tests that read what was logged.
///
/// A bare `tracing::subscriber::with_default` is not enough while other tests run on other threads:
/// with no global subscriber and only one scoped one alive, `tracing-core` computes a new callsite's
/// interest from the registering thread's own default, so a callsite first reached by another test
/// (a thread with no subscriber) is cached as "never" and this test's events from it vanish. A
/// second dispatcher that lives for the whole test process keeps `tracing-core` on the path that
/// asks every live dispatcher.
#[cfg(test)]
pub(crate) fn with_scoped_subscriber<T>(
    subscriber: impl Subscriber + Send + Sync + 'static,
    f: impl FnOnce() -> T,
) -> T {
    static KEEPER: std::sync::LazyLock<tracing::Dispatch> =
        std::sync::LazyLock::new(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    std::sync::LazyLock::force(&KEEPER);
    tracing::subscriber::with_default(subscriber, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_leave_out_the_layer_folder() {
        assert_eq!(public_target(module_path!()), "mcpapp_plugin::logging::tests");
        assert_eq!(public_target("mcpapp_plugin::apps::discovery"), "mcpapp_plugin::discovery");
        assert_eq!(public_target("mcpapp_plugin::export::instance"), "mcpapp_plugin::instance");
        assert_eq!(public_target("mcpapp_plugin::app_output"), "mcpapp_plugin::app_output");
        assert_eq!(public_target("mcpapp_plugin"), "mcpapp_plugin");
        assert_eq!(public_target("rmcp::service::client"), "rmcp::service::client");
        assert_eq!(public_target("other::apps::x"), "other::apps::x");
    }

    /// The flake `with_scoped_subscriber` exists for, made certain: the callsite is first reached
    /// on a thread without a subscriber while this test's subscriber is the only one alive.
    #[test]
    fn a_callsite_first_reached_where_nothing_listens_still_logs_to_the_scoped_subscriber() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Count(Arc<AtomicUsize>);
        impl<S: Subscriber> Layer<S> for Count {
            fn on_event(&self, _: &Event<'_>, _: Context<'_, S>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        fn log_once() {
            tracing::info!(target: "scoped-subscriber-test", "hello");
        }
        let count = Arc::new(AtomicUsize::new(0));
        super::with_scoped_subscriber(tracing_subscriber::registry().with(Count(count.clone())), || {
            std::thread::spawn(log_once).join().unwrap();
            log_once();
        });
        assert_eq!(count.load(Ordering::Relaxed), 1);
    }
}
