//! The few GSS-API and krb5 calls an acceptor needs, bound at run time
//! from MIT Kerberos' shared libraries (`libgssapi_krb5.so.2`,
//! `libkrb5.so.3`). Loaded, not linked: a broker that offers no GSSAPI
//! neither needs Kerberos installed nor loads it.
//!
//! Types and constants are RFC 2744's C bindings as MIT's `gssapi.h`
//! declares them on Linux (`OM_uint32` is 32 bits, handles are pointers).

use libloading::Library;
use std::ffi::{c_char, c_int, c_void};

/// `OM_uint32`.
pub type OmUint32 = u32;
/// `gss_ctx_id_t`, `gss_name_t`, `gss_cred_id_t`: opaque handles.
pub type Handle = *mut c_void;

/// `gss_buffer_desc`.
#[repr(C)]
pub struct Buffer {
    pub length: usize,
    pub value: *mut c_void,
}

impl Buffer {
    /// An empty buffer, for the library to fill.
    pub fn empty() -> Buffer {
        Buffer {
            length: 0,
            value: std::ptr::null_mut(),
        }
    }

    /// A buffer over `bytes`, which the library only reads.
    pub fn reading(bytes: &[u8]) -> Buffer {
        Buffer {
            length: bytes.len(),
            value: bytes.as_ptr().cast_mut().cast(),
        }
    }

    /// The bytes the library wrote.
    ///
    /// # Safety
    /// `self` was filled by the library (or is empty) and not released.
    pub unsafe fn to_vec(&self) -> Vec<u8> {
        if self.value.is_null() || self.length == 0 {
            return Vec::new();
        }
        // SAFETY: the library wrote `length` bytes at `value`.
        unsafe { std::slice::from_raw_parts(self.value.cast::<u8>(), self.length) }.to_vec()
    }
}

/// `GSS_S_CONTINUE_NEEDED` (a supplementary bit).
pub const CONTINUE_NEEDED: OmUint32 = 1;
/// `GSS_C_GSS_CODE`, `GSS_C_MECH_CODE`: the two kinds of status.
pub const GSS_CODE: c_int = 1;
pub const MECH_CODE: c_int = 2;

/// Whether a major status is an error (`GSS_ERROR()`: the calling or
/// routine error fields).
pub fn is_error(major: OmUint32) -> bool {
    major & 0xffff_0000 != 0
}

type AcceptSecContext = unsafe extern "C" fn(
    *mut OmUint32,
    *mut Handle,
    Handle,
    *mut Buffer,
    *mut c_void,
    *mut Handle,
    *mut *mut c_void,
    *mut Buffer,
    *mut OmUint32,
    *mut OmUint32,
    *mut Handle,
) -> OmUint32;
type DisplayName =
    unsafe extern "C" fn(*mut OmUint32, Handle, *mut Buffer, *mut *mut c_void) -> OmUint32;
type ReleaseBuffer = unsafe extern "C" fn(*mut OmUint32, *mut Buffer) -> OmUint32;
type ReleaseHandle = unsafe extern "C" fn(*mut OmUint32, *mut Handle) -> OmUint32;
type DeleteSecContext = unsafe extern "C" fn(*mut OmUint32, *mut Handle, *mut Buffer) -> OmUint32;
type Wrap = unsafe extern "C" fn(
    *mut OmUint32,
    Handle,
    c_int,
    OmUint32,
    *mut Buffer,
    *mut c_int,
    *mut Buffer,
) -> OmUint32;
type Unwrap = unsafe extern "C" fn(
    *mut OmUint32,
    Handle,
    *mut Buffer,
    *mut Buffer,
    *mut c_int,
    *mut OmUint32,
) -> OmUint32;
type DisplayStatus = unsafe extern "C" fn(
    *mut OmUint32,
    OmUint32,
    c_int,
    *mut c_void,
    *mut OmUint32,
    *mut Buffer,
) -> OmUint32;
type RegisterAcceptorIdentity = unsafe extern "C" fn(*const c_char) -> OmUint32;
type InitContext = unsafe extern "C" fn(*mut Handle) -> i32;
type GetDefaultRealm = unsafe extern "C" fn(Handle, *mut *mut c_char) -> i32;
type FreeDefaultRealm = unsafe extern "C" fn(Handle, *mut c_char);
type FreeContext = unsafe extern "C" fn(Handle);

/// The loaded libraries and the calls taken from them. The function
/// pointers stay valid while the libraries are loaded, which is as long
/// as this value lives (it is kept for the life of the process).
pub struct Api {
    pub accept_sec_context: AcceptSecContext,
    pub display_name: DisplayName,
    pub release_buffer: ReleaseBuffer,
    pub release_name: ReleaseHandle,
    pub delete_sec_context: DeleteSecContext,
    pub wrap: Wrap,
    pub unwrap: Unwrap,
    pub display_status: DisplayStatus,
    pub register_acceptor_identity: RegisterAcceptorIdentity,
    pub init_context: InitContext,
    pub get_default_realm: GetDefaultRealm,
    pub free_default_realm: FreeDefaultRealm,
    pub free_context: FreeContext,
    _gssapi: Library,
    _krb5: Library,
}

/// Loads `name` (a soname, found by the dynamic loader's search).
fn open(name: &str) -> Result<Library, String> {
    // SAFETY: MIT Kerberos' libraries run no initializer that depends on
    // the loading program beyond libc's.
    unsafe { Library::new(name) }
        .map_err(|e| format!("cannot load {name} (MIT Kerberos; Debian's libgssapi-krb5-2): {e}"))
}

/// One symbol of `library`, as a function pointer of type `T`.
fn symbol<T: Copy>(library: &Library, name: &str) -> Result<T, String> {
    // SAFETY: each caller names the symbol with the C signature `T`
    // declares above, from RFC 2744 and MIT's headers.
    unsafe { library.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{name} not found in MIT Kerberos: {e}"))
}

impl Api {
    /// Loads the libraries and their calls.
    pub fn load() -> Result<Api, String> {
        let gssapi = open("libgssapi_krb5.so.2")?;
        let krb5 = open("libkrb5.so.3")?;
        Ok(Api {
            accept_sec_context: symbol(&gssapi, "gss_accept_sec_context")?,
            display_name: symbol(&gssapi, "gss_display_name")?,
            release_buffer: symbol(&gssapi, "gss_release_buffer")?,
            release_name: symbol(&gssapi, "gss_release_name")?,
            delete_sec_context: symbol(&gssapi, "gss_delete_sec_context")?,
            wrap: symbol(&gssapi, "gss_wrap")?,
            unwrap: symbol(&gssapi, "gss_unwrap")?,
            display_status: symbol(&gssapi, "gss_display_status")?,
            register_acceptor_identity: symbol(&gssapi, "krb5_gss_register_acceptor_identity")?,
            init_context: symbol(&krb5, "krb5_init_context")?,
            get_default_realm: symbol(&krb5, "krb5_get_default_realm")?,
            free_default_realm: symbol(&krb5, "krb5_free_default_realm")?,
            free_context: symbol(&krb5, "krb5_free_context")?,
            _gssapi: gssapi,
            _krb5: krb5,
        })
    }
}
