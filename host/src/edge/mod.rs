//! The network edge: everything a request meets before it reaches a run.
//!
//! - [`audit`]: the audit log of every operator action, who did it and what came of it.
//! - [`http`]: the HTTP API (docs/api.md) and the embedded web UI, each request checked
//!   by the Host/Origin guard and the token or device session first.
//! - [`token`]: lab's access token, session cookies and login codes.
//! - [`devices`]: the browsers and phones logged in, one device session each.
//! - [`pairing`]: pairing a phone, a one-time login link shown as a QR code.

pub mod audit;
pub mod devices;
pub mod http;
pub mod pairing;
pub mod token;
