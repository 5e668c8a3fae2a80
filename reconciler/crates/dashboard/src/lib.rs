//! gitfleet's web dashboard: one server-rendered HTML page, style embedded,
//! no script and no external resource, rendered from a [`view::FleetView`]
//! (what the reconcile loop saw after an iteration). The loop serves it at
//! `/`; `gitfleet serve` serves it from a stopped loop's state. Every
//! string from the fleet is escaped ([`html::escape`]).

pub mod history;
pub mod html;
pub mod page;
pub mod view;

pub use history::{HistoryView, render_history};
pub use page::{Extras, Source, render};
pub use view::FleetView;
