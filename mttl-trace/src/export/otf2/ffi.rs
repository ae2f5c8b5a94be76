//! The OTF2 3.x functions and constants used (`otf2/OTF2_*.h`).
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

pub(crate) type OTF2_ErrorCode = c_int;
pub(crate) const OTF2_SUCCESS: OTF2_ErrorCode = 0;
pub(crate) const OTF2_UNDEFINED_UINT32: u32 = u32::MAX;

pub(crate) const OTF2_FILEMODE_WRITE: u8 = 0;
pub(crate) const OTF2_SUBSTRATE_POSIX: u8 = 1;
pub(crate) const OTF2_COMPRESSION_NONE: u8 = 1;
pub(crate) const OTF2_FLUSH: u8 = 1;

pub(crate) const OTF2_REGION_ROLE_FUNCTION: u8 = 1;
pub(crate) const OTF2_REGION_ROLE_CODE: u8 = 4;
pub(crate) const OTF2_REGION_ROLE_BARRIER: u8 = 15;
pub(crate) const OTF2_REGION_ROLE_COLL_ONE2ALL: u8 = 23;
pub(crate) const OTF2_REGION_ROLE_COLL_ALL2ONE: u8 = 24;
pub(crate) const OTF2_REGION_ROLE_COLL_ALL2ALL: u8 = 25;
pub(crate) const OTF2_REGION_ROLE_POINT2POINT: u8 = 28;
pub(crate) const OTF2_REGION_ROLE_RMA: u8 = 29;
pub(crate) const OTF2_REGION_ROLE_ARTIFICIAL: u8 = 31;

pub(crate) const OTF2_PARADIGM_USER: u8 = 1;
pub(crate) const OTF2_PARADIGM_MPI: u8 = 4;
pub(crate) const OTF2_PARADIGM_MEASUREMENT_SYSTEM: u8 = 6;

pub(crate) const OTF2_LOCATION_GROUP_TYPE_PROCESS: u8 = 1;
pub(crate) const OTF2_LOCATION_TYPE_CPU_THREAD: u8 = 1;
pub(crate) const OTF2_GROUP_TYPE_COMM_LOCATIONS: u8 = 4;
pub(crate) const OTF2_GROUP_TYPE_COMM_GROUP: u8 = 5;

pub(crate) const OTF2_PARAMETER_TYPE_STRING: u8 = 0;

pub(crate) const OTF2_COLLECTIVE_OP_BARRIER: u8 = 0;
pub(crate) const OTF2_COLLECTIVE_OP_BCAST: u8 = 1;
pub(crate) const OTF2_COLLECTIVE_OP_ALLREDUCE: u8 = 11;
pub(crate) const OTF2_COLLECTIVE_OP_REDUCE: u8 = 12;

/// `OTF2_Archive`, `OTF2_EvtWriter`, `OTF2_GlobalDefWriter`,
/// `OTF2_DefWriter`: opaque handles.
#[repr(C)]
pub(crate) struct Opaque {
    _private: [u8; 0],
}

pub(crate) type PreFlush = unsafe extern "C" fn(*mut c_void, u8, u64, *mut c_void, bool) -> u8;
pub(crate) type PostFlush = unsafe extern "C" fn(*mut c_void, u8, u64) -> u64;

/// `OTF2_FlushCallbacks`.
#[repr(C)]
pub(crate) struct FlushCallbacks {
    pub(crate) pre_flush: PreFlush,
    pub(crate) post_flush: PostFlush,
}

unsafe extern "C" {
    pub(crate) fn OTF2_Archive_Open(
        path: *const c_char,
        name: *const c_char,
        mode: u8,
        chunk_events: u64,
        chunk_defs: u64,
        substrate: u8,
        compression: u8,
    ) -> *mut Opaque;
    pub(crate) fn OTF2_Archive_Close(a: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_SetFlushCallbacks(
        a: *mut Opaque,
        cb: *const FlushCallbacks,
        data: *mut c_void,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_SetSerialCollectiveCallbacks(a: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_SetCreator(a: *mut Opaque, c: *const c_char) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_OpenEvtFiles(a: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_CloseEvtFiles(a: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_GetEvtWriter(a: *mut Opaque, location: u64) -> *mut Opaque;
    pub(crate) fn OTF2_Archive_CloseEvtWriter(a: *mut Opaque, w: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_OpenDefFiles(a: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_CloseDefFiles(a: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_GetDefWriter(a: *mut Opaque, location: u64) -> *mut Opaque;
    pub(crate) fn OTF2_Archive_CloseDefWriter(a: *mut Opaque, w: *mut Opaque) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_Archive_GetGlobalDefWriter(a: *mut Opaque) -> *mut Opaque;

    pub(crate) fn OTF2_EvtWriter_Enter(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
        region: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_Leave(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
        region: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiSend(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
        receiver: u32,
        comm: u32,
        tag: u32,
        length: u64,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiRecv(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
        sender: u32,
        comm: u32,
        tag: u32,
        length: u64,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiCollectiveBegin(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_MpiCollectiveEnd(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
        op: u8,
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_ParameterString(
        w: *mut Opaque,
        attrs: *mut c_void,
        time: u64,
        parameter: u32,
        string: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_EvtWriter_GetNumberOfEvents(
        w: *mut Opaque,
        events: *mut u64,
    ) -> OTF2_ErrorCode;

    pub(crate) fn OTF2_GlobalDefWriter_WriteClockProperties(
        w: *mut Opaque,
        resolution: u64,
        offset: u64,
        length: u64,
        realtime: u64,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteString(
        w: *mut Opaque,
        id: u32,
        s: *const c_char,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteParameter(
        w: *mut Opaque,
        id: u32,
        name: u32,
        kind: u8,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteRegion(
        w: *mut Opaque,
        id: u32,
        name: u32,
        canonical: u32,
        description: u32,
        role: u8,
        paradigm: u8,
        flags: u32,
        file: u32,
        begin_line: u32,
        end_line: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteSystemTreeNode(
        w: *mut Opaque,
        id: u32,
        name: u32,
        class: u32,
        parent: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteLocationGroup(
        w: *mut Opaque,
        id: u32,
        name: u32,
        kind: u8,
        system_tree_parent: u32,
        creating_group: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteLocation(
        w: *mut Opaque,
        id: u64,
        name: u32,
        kind: u8,
        events: u64,
        group: u32,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteGroup(
        w: *mut Opaque,
        id: u32,
        name: u32,
        kind: u8,
        paradigm: u8,
        flags: u32,
        count: u32,
        members: *const u64,
    ) -> OTF2_ErrorCode;
    pub(crate) fn OTF2_GlobalDefWriter_WriteComm(
        w: *mut Opaque,
        id: u32,
        name: u32,
        group: u32,
        parent: u32,
        flags: u32,
    ) -> OTF2_ErrorCode;

    pub(crate) fn OTF2_Error_GetDescription(code: OTF2_ErrorCode) -> *const c_char;
}
