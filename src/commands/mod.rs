//! One module per subcommand: read arguments, call the library, print.

pub mod schema;
pub mod validate;
