//! Kerberos for SASL/GSSAPI: the broker as a GSS-API acceptor, with MIT
//! Kerberos loaded at run time ([`ffi`]), and Kafka's
//! `sasl.kerberos.principal.to.local.rules` ([`rules`]).
//!
//! The acceptor is the process's: MIT's acceptor identity (the keytab) is
//! global, so [`init`] runs once at start, before any listener opens,
//! and every connection's [`AcceptContext`] uses it. Tickets for any
//! principal of the keytab are accepted (a broker's keytab holds its own);
//! the default realm is read once, for the `DEFAULT` rule.

mod ffi;
pub mod rules;

use ffi::{Api, Buffer, Handle, OmUint32};
use std::ffi::{CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

/// The loaded Kerberos libraries and the realm `krb5.conf` names default.
pub struct Kerberos {
    api: Api,
    default_realm: String,
}

static KERBEROS: OnceLock<Kerberos> = OnceLock::new();

/// Loads MIT Kerberos and makes `keytab` the acceptor's keys (`None`:
/// `KRB5_KTNAME` or the system keytab). Once per process; a second call
/// keeps the first keytab and fails if it names another.
pub fn init(keytab: Option<&Path>) -> Result<&'static Kerberos, String> {
    static KEYTAB: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    let wanted = keytab.map(Path::to_path_buf);
    if let Some(kerberos) = KERBEROS.get() {
        return match KEYTAB.get() {
            Some(first) if *first != wanted => Err(String::from(
                "one keytab per process: Kerberos was already set up with another",
            )),
            _ => Ok(kerberos),
        };
    }
    let api = Api::load()?;
    if let Some(path) = keytab {
        if !path.is_file() {
            return Err(format!("keytab {} is not a readable file", path.display()));
        }
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| String::from("a keytab path holds a NUL byte"))?;
        // SAFETY: a NUL-terminated path; MIT copies it.
        let status = unsafe { (api.register_acceptor_identity)(c_path.as_ptr()) };
        if status != 0 {
            return Err(format!("cannot use keytab {}", path.display()));
        }
    }
    let default_realm = default_realm(&api)?;
    let _ = KEYTAB.set(wanted);
    Ok(KERBEROS.get_or_init(|| Kerberos { api, default_realm }))
}

/// The process's Kerberos, once [`init`] ran.
pub fn get() -> Option<&'static Kerberos> {
    KERBEROS.get()
}

/// `krb5.conf`'s `default_realm`.
fn default_realm(api: &Api) -> Result<String, String> {
    let mut context: Handle = std::ptr::null_mut();
    // SAFETY: krb5_init_context fills `context`; freed below.
    let code = unsafe { (api.init_context)(&mut context) };
    if code != 0 || context.is_null() {
        return Err(format!(
            "cannot read the Kerberos configuration (krb5 error {code})"
        ));
    }
    let mut realm: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: a live context; `realm` is freed with the matching call.
    let code = unsafe { (api.get_default_realm)(context, &mut realm) };
    let found = if code == 0 && !realm.is_null() {
        // SAFETY: a NUL-terminated string the library allocated.
        let text = unsafe { CStr::from_ptr(realm) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: allocated by krb5_get_default_realm on this context.
        unsafe { (api.free_default_realm)(context, realm) };
        Ok(text)
    } else {
        Err(format!(
            "krb5.conf names no default_realm (krb5 error {code})"
        ))
    };
    // SAFETY: the context made above, freed once.
    unsafe { (api.free_context)(context) };
    found
}

impl Kerberos {
    /// `krb5.conf`'s default realm.
    pub fn default_realm(&self) -> &str {
        &self.default_realm
    }

    /// A new acceptor context, for one connection's exchange.
    pub fn context(&'static self) -> AcceptContext {
        AcceptContext {
            kerberos: self,
            handle: std::ptr::null_mut(),
            initiator: None,
        }
    }

    /// The library's words for a failed call.
    fn status_text(&self, major: OmUint32, minor: OmUint32) -> String {
        let mut parts = Vec::new();
        for (code, kind) in [(major, ffi::GSS_CODE), (minor, ffi::MECH_CODE)] {
            if code == 0 {
                continue;
            }
            let mut more: OmUint32 = 0;
            // Each call gives one line; `more` says whether another follows.
            for _ in 0..8 {
                let mut ignored: OmUint32 = 0;
                let mut text = Buffer::empty();
                // SAFETY: plain out-parameters; `text` is released below.
                let status = unsafe {
                    (self.api.display_status)(
                        &mut ignored,
                        code,
                        kind,
                        std::ptr::null_mut(),
                        &mut more,
                        &mut text,
                    )
                };
                if ffi::is_error(status) {
                    break;
                }
                // SAFETY: filled by the library just above.
                parts.push(String::from_utf8_lossy(&unsafe { text.to_vec() }).into_owned());
                self.release(&mut text);
                if more == 0 {
                    break;
                }
            }
        }
        if parts.is_empty() {
            format!("GSS-API error {major:#x}/{minor}")
        } else {
            parts.join(": ")
        }
    }

    fn release(&self, buffer: &mut Buffer) {
        let mut minor: OmUint32 = 0;
        // SAFETY: a buffer the library filled, released once.
        unsafe { (self.api.release_buffer)(&mut minor, buffer) };
    }

    /// The bytes of a buffer the library filled, which it then releases.
    fn take(&self, buffer: &mut Buffer) -> Vec<u8> {
        // SAFETY: filled by a library call (or still empty).
        let bytes = unsafe { buffer.to_vec() };
        if !buffer.value.is_null() {
            self.release(buffer);
        }
        bytes
    }
}

/// One GSS-API security context, accepting a client's tokens.
pub struct AcceptContext {
    kerberos: &'static Kerberos,
    handle: Handle,
    initiator: Option<String>,
}

/// What the client's token led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The token for the client (may be empty).
    pub output: Vec<u8>,
    /// The context is established.
    pub complete: bool,
}

impl AcceptContext {
    /// Accepts the client's next context token.
    pub fn accept(&mut self, token: &[u8]) -> Result<Accepted, String> {
        let api = &self.kerberos.api;
        let mut minor: OmUint32 = 0;
        let mut input = Buffer::reading(token);
        let mut source: Handle = std::ptr::null_mut();
        let mut output = Buffer::empty();
        // SAFETY: RFC 2744's gss_accept_sec_context with the default
        // acceptor credential and no channel bindings; `input` is only
        // read, `output` and `source` are released below.
        let major = unsafe {
            (api.accept_sec_context)(
                &mut minor,
                &mut self.handle,
                std::ptr::null_mut(),
                &mut input,
                std::ptr::null_mut(),
                &mut source,
                std::ptr::null_mut(),
                &mut output,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        let bytes = self.kerberos.take(&mut output);
        if !source.is_null() {
            let name = self.display(source);
            let mut minor: OmUint32 = 0;
            // SAFETY: a name the library made in the call above.
            unsafe { (api.release_name)(&mut minor, &mut source) };
            self.initiator = Some(name?);
        }
        if ffi::is_error(major) {
            return Err(self.kerberos.status_text(major, minor));
        }
        // The low bits are supplementary information; one of them says
        // another token is needed.
        let complete = (major & ffi::CONTINUE_NEEDED) == 0;
        Ok(Accepted {
            output: bytes,
            complete,
        })
    }

    fn display(&self, name: Handle) -> Result<String, String> {
        let mut minor: OmUint32 = 0;
        let mut text = Buffer::empty();
        // SAFETY: a live name; `text` is released by `take`.
        let major = unsafe {
            (self.kerberos.api.display_name)(&mut minor, name, &mut text, std::ptr::null_mut())
        };
        if ffi::is_error(major) {
            return Err(self.kerberos.status_text(major, minor));
        }
        String::from_utf8(self.kerberos.take(&mut text))
            .map_err(|_| String::from("the client's principal is not UTF-8"))
    }

    /// The client's principal (`alice@EXAMPLE.COM`), once known.
    pub fn initiator(&self) -> Option<&str> {
        self.initiator.as_deref()
    }

    /// Wraps `message` with integrity only (RFC 4752's security layer
    /// negotiation is signed, not sealed).
    pub fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
        let mut minor: OmUint32 = 0;
        let mut input = Buffer::reading(message);
        let mut output = Buffer::empty();
        let mut sealed = 0;
        // SAFETY: an established context; `input` is only read.
        let major = unsafe {
            (self.kerberos.api.wrap)(
                &mut minor,
                self.handle,
                0,
                0,
                &mut input,
                &mut sealed,
                &mut output,
            )
        };
        let bytes = self.kerberos.take(&mut output);
        if ffi::is_error(major) {
            return Err(self.kerberos.status_text(major, minor));
        }
        Ok(bytes)
    }

    /// Unwraps the client's wrapped `token`.
    pub fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        let mut minor: OmUint32 = 0;
        let mut input = Buffer::reading(token);
        let mut output = Buffer::empty();
        let mut sealed = 0;
        let mut qop: OmUint32 = 0;
        // SAFETY: an established context; `input` is only read.
        let major = unsafe {
            (self.kerberos.api.unwrap)(
                &mut minor,
                self.handle,
                &mut input,
                &mut output,
                &mut sealed,
                &mut qop,
            )
        };
        let bytes = self.kerberos.take(&mut output);
        if ffi::is_error(major) {
            return Err(self.kerberos.status_text(major, minor));
        }
        Ok(bytes)
    }
}

impl Drop for AcceptContext {
    fn drop(&mut self) {
        if self.handle.is_null() {
            return;
        }
        let mut minor: OmUint32 = 0;
        // SAFETY: a context this value made, deleted once; no output
        // token is asked for.
        unsafe {
            (self.kerberos.api.delete_sec_context)(
                &mut minor,
                &mut self.handle,
                std::ptr::null_mut(),
            )
        };
    }
}
