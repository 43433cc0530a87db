//! A minimal stderr logger for the `log` facade (fuser logs through it).

use log::LevelFilter;
use log::Log;
use log::Metadata;
use log::Record;

/// Writes `wbstall-fuse[LEVEL] target: message` lines to stderr.
struct StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "wbstall-fuse[{}] {}: {}",
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

/// Installs the logger with the given maximum level (a second call only changes the level).
pub fn init(level: LevelFilter) {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}
