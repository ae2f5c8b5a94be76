//! The writer proper (the module's steps), over [`super::ffi`].

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::Path;
use std::ptr::null_mut;

use super::ffi::*;
use crate::export::{
    scene, walk, Category, ExportError, ExportOptions, ExportSummary, Item, Scene, Step,
};
use crate::read::Trace;

/// The communicator of all ranks.
const WORLD: u32 = 0;

unsafe extern "C" fn pre_flush(_: *mut c_void, _: u8, _: u64, _: *mut c_void, _: bool) -> u8 {
    OTF2_FLUSH
}

unsafe extern "C" fn post_flush(_: *mut c_void, _: u8, _: u64) -> u64 {
    0
}

static FLUSH: FlushCallbacks = FlushCallbacks {
    pre_flush,
    post_flush,
};

/// An open archive; closed on drop (also after an error).
struct Archive {
    ptr: *mut Opaque,
    dir: String,
}

impl Drop for Archive {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from OTF2_Archive_Open and is closed once,
        // here; every writer taken from it was closed or is released
        // by the library with it.
        unsafe { OTF2_Archive_Close(self.ptr) };
    }
}

impl Archive {
    fn check(&self, call: &'static str, code: OTF2_ErrorCode) -> Result<(), ExportError> {
        if code == OTF2_SUCCESS {
            return Ok(());
        }
        // SAFETY: OTF2_Error_GetDescription takes any code and returns
        // a static NUL-terminated string (or null).
        let what = unsafe {
            let d = OTF2_Error_GetDescription(code);
            if d.is_null() {
                format!("error {code}")
            } else {
                std::ffi::CStr::from_ptr(d).to_string_lossy().into_owned()
            }
        };
        Err(ExportError::Otf2 {
            path: self.dir.clone().into(),
            call,
            what,
        })
    }

    fn handle(&self, call: &'static str, p: *mut Opaque) -> Result<*mut Opaque, ExportError> {
        if p.is_null() {
            return Err(ExportError::Otf2 {
                path: self.dir.clone().into(),
                call,
                what: "the library returned no handle".into(),
            });
        }
        Ok(p)
    }
}

/// A C string of `s` (NULs, which names never hold, replaced).
fn c(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Interned strings and regions of the definitions.
#[derive(Default)]
struct Defs {
    strings: Vec<String>,
    string_ids: HashMap<String, u32>,
    /// (name, category) -> region id.
    regions: HashMap<(String, Category), u32>,
    /// Per region id: its name's id, role and paradigm.
    region_list: Vec<(u32, u8, u8)>,
    /// category -> parameter id (the instants' string parameters).
    parameters: HashMap<Category, u32>,
    /// Per parameter id: its name's id.
    parameter_list: Vec<u32>,
}

impl Defs {
    fn string(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    /// The string parameter an instant of `category` sets: `mttl
    /// <category>` (`mttl invoke`, `mttl thread`, `mttl trace`...).
    fn parameter(&mut self, category: Category) -> u32 {
        if let Some(&id) = self.parameters.get(&category) {
            return id;
        }
        let name = self.string(&format!("mttl {}", category.name()));
        let id = self.parameter_list.len() as u32;
        self.parameter_list.push(name);
        self.parameters.insert(category, id);
        id
    }

    fn region(&mut self, it: &Item) -> u32 {
        let key = (it.name.clone(), it.category);
        if let Some(&id) = self.regions.get(&key) {
            return id;
        }
        let name = self.string(&it.name);
        let id = self.region_list.len() as u32;
        let (role, paradigm) = role_and_paradigm(it);
        self.region_list.push((name, role, paradigm));
        self.regions.insert(key, id);
        id
    }
}

fn role_and_paradigm(it: &Item) -> (u8, u8) {
    match it.category {
        Category::Comm => (OTF2_REGION_ROLE_POINT2POINT, OTF2_PARADIGM_MPI),
        Category::Collective => {
            let role = match it.collective.as_ref().map(|c| c.name.as_str()) {
                Some("barrier") => OTF2_REGION_ROLE_BARRIER,
                Some("broadcast") => OTF2_REGION_ROLE_COLL_ONE2ALL,
                Some("reduce") => OTF2_REGION_ROLE_COLL_ALL2ONE,
                _ => OTF2_REGION_ROLE_COLL_ALL2ALL,
            };
            (role, OTF2_PARADIGM_MPI)
        }
        Category::Memory => (OTF2_REGION_ROLE_RMA, OTF2_PARADIGM_USER),
        Category::Trace => (
            OTF2_REGION_ROLE_ARTIFICIAL,
            OTF2_PARADIGM_MEASUREMENT_SYSTEM,
        ),
        Category::Region => (OTF2_REGION_ROLE_CODE, OTF2_PARADIGM_USER),
        Category::Invoke | Category::Sync | Category::Thread => {
            (OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_USER)
        }
    }
}

fn collective_op(name: &str) -> u8 {
    match name {
        "barrier" => OTF2_COLLECTIVE_OP_BARRIER,
        "broadcast" => OTF2_COLLECTIVE_OP_BCAST,
        "reduce" => OTF2_COLLECTIVE_OP_REDUCE,
        _ => OTF2_COLLECTIVE_OP_ALLREDUCE,
    }
}

/// A location: which rank, its name, and its lane's items.
struct Location<'a> {
    id: u64,
    rank: usize,
    name: String,
    lane: &'a [Item],
}

fn locations(s: &Scene) -> Vec<Location<'_>> {
    let mut next = s.ranks.len() as u64;
    let mut out = Vec::new();
    for (rank, r) in s.ranks.iter().enumerate() {
        for (ti, track) in r.tracks.iter().enumerate() {
            if ti == 0 && track.lanes.is_empty() {
                // The rank's location exists even with nothing on it.
                out.push(Location {
                    id: rank as u64,
                    rank,
                    name: track.name.clone(),
                    lane: &[],
                });
            }
            for (li, lane) in track.lanes.iter().enumerate() {
                let id = if ti == 0 && li == 0 {
                    rank as u64
                } else {
                    next += 1;
                    next - 1
                };
                let name = match li {
                    0 => track.name.clone(),
                    _ => format!("{} (overlapping {li})", track.name),
                };
                out.push(Location {
                    id,
                    rank,
                    name,
                    lane,
                });
            }
        }
    }
    out
}

/// Writes the scene of `t` into the empty directory `dir`.
pub(super) fn write(
    t: &Trace,
    dir: &Path,
    opts: ExportOptions,
) -> Result<ExportSummary, ExportError> {
    let s = scene(t, opts);
    let dir_text = dir.display().to_string();
    let path = c(&dir_text);
    let name = c("traces");
    // SAFETY: both strings are NUL-terminated and outlive the call.
    let ptr = unsafe {
        OTF2_Archive_Open(
            path.as_ptr(),
            name.as_ptr(),
            OTF2_FILEMODE_WRITE,
            1 << 20,
            4 << 20,
            OTF2_SUBSTRATE_POSIX,
            OTF2_COMPRESSION_NONE,
        )
    };
    if ptr.is_null() {
        return Err(ExportError::Otf2 {
            path: dir.to_owned(),
            call: "OTF2_Archive_Open",
            what: "the library could not create the archive".into(),
        });
    }
    let a = Archive { ptr, dir: dir_text };
    let creator = c(concat!("mttl-trace ", env!("CARGO_PKG_VERSION")));
    // SAFETY: (this block and every OTF2 call below) `a.ptr` is the
    // open archive, writers are used only between their Get and Close
    // on this thread, and every pointer argument is valid for the
    // call (strings NUL-terminated, `members` a live slice).
    unsafe {
        a.check(
            "OTF2_Archive_SetFlushCallbacks",
            OTF2_Archive_SetFlushCallbacks(a.ptr, &FLUSH, null_mut()),
        )?;
        a.check(
            "OTF2_Archive_SetSerialCollectiveCallbacks",
            OTF2_Archive_SetSerialCollectiveCallbacks(a.ptr),
        )?;
        a.check(
            "OTF2_Archive_SetCreator",
            OTF2_Archive_SetCreator(a.ptr, creator.as_ptr()),
        )?;
        a.check(
            "OTF2_Archive_OpenEvtFiles",
            OTF2_Archive_OpenEvtFiles(a.ptr),
        )?;
    }
    let mut defs = Defs::default();
    let (zero, last) = s.span();
    let locations = locations(&s);
    let mut counts = Vec::with_capacity(locations.len());
    let mut out_flows: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    let mut in_flows: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (k, f) in s.flows.iter().enumerate() {
        out_flows.entry(f.send).or_default().push(k);
        in_flows.entry(f.recv).or_default().push(k);
    }
    for loc in &locations {
        // SAFETY: see above.
        let w = a.handle("OTF2_Archive_GetEvtWriter", unsafe {
            OTF2_Archive_GetEvtWriter(a.ptr, loc.id)
        })?;
        let mut result = Ok(());
        walk(loc.lane, |step| {
            if result.is_ok() {
                result = event(&a, w, step, loc.rank, &s, &out_flows, &in_flows, &mut defs);
            }
        });
        result?;
        let mut n = 0u64;
        // SAFETY: see above.
        unsafe {
            a.check(
                "OTF2_EvtWriter_GetNumberOfEvents",
                OTF2_EvtWriter_GetNumberOfEvents(w, &mut n),
            )?;
            a.check(
                "OTF2_Archive_CloseEvtWriter",
                OTF2_Archive_CloseEvtWriter(a.ptr, w),
            )?;
        }
        counts.push(n);
    }
    // SAFETY: see above.
    unsafe {
        a.check(
            "OTF2_Archive_CloseEvtFiles",
            OTF2_Archive_CloseEvtFiles(a.ptr),
        )?;
        a.check(
            "OTF2_Archive_OpenDefFiles",
            OTF2_Archive_OpenDefFiles(a.ptr),
        )?;
        for loc in &locations {
            let w = a.handle(
                "OTF2_Archive_GetDefWriter",
                OTF2_Archive_GetDefWriter(a.ptr, loc.id),
            )?;
            a.check(
                "OTF2_Archive_CloseDefWriter",
                OTF2_Archive_CloseDefWriter(a.ptr, w),
            )?;
        }
        a.check(
            "OTF2_Archive_CloseDefFiles",
            OTF2_Archive_CloseDefFiles(a.ptr),
        )?;
    }
    let real_zero = t.ranks.first().map_or(0, |r0| {
        r0.header
            .real_start
            .saturating_add(zero.saturating_sub(r0.header.mono_start))
    });
    definitions(
        &a,
        &s,
        &locations,
        &counts,
        &mut defs,
        (zero, last, real_zero),
    )?;
    Ok(s.summary())
}

/// The OTF2 events of one step of a lane.
#[allow(clippy::too_many_arguments)]
fn event(
    a: &Archive,
    w: *mut Opaque,
    step: Step<'_>,
    rank: usize,
    s: &Scene,
    out_flows: &HashMap<(usize, usize), Vec<usize>>,
    in_flows: &HashMap<(usize, usize), Vec<usize>>,
    defs: &mut Defs,
) -> Result<(), ExportError> {
    let flows = |m: &HashMap<(usize, usize), Vec<usize>>, it: &Item| {
        it.event
            .and_then(|e| m.get(&(rank, e)))
            .map_or(&[][..], |v| &v[..])
            .iter()
            .map(|&k| s.flows[k])
            .collect::<Vec<_>>()
    };
    let null = null_mut();
    // SAFETY: `w` is an open event writer of `a` (see `write`).
    unsafe {
        match step {
            // An instant (a call issued or answered, a thread spawned,
            // run, blocked or exited, a clock record...) sets its
            // category's string parameter to its name, at its time.
            Step::Instant(it) => {
                let parameter = defs.parameter(it.category);
                let value = defs.string(&it.name);
                a.check(
                    "OTF2_EvtWriter_ParameterString",
                    OTF2_EvtWriter_ParameterString(w, null, it.begin, parameter, value),
                )?;
            }
            Step::Begin(it) => {
                let region = defs.region(it);
                a.check(
                    "OTF2_EvtWriter_Enter",
                    OTF2_EvtWriter_Enter(w, null, it.begin, region),
                )?;
                if it.collective.is_some() {
                    a.check(
                        "OTF2_EvtWriter_MpiCollectiveBegin",
                        OTF2_EvtWriter_MpiCollectiveBegin(w, null, it.begin),
                    )?;
                }
                for f in flows(out_flows, it) {
                    a.check(
                        "OTF2_EvtWriter_MpiSend",
                        OTF2_EvtWriter_MpiSend(
                            w,
                            null,
                            it.begin,
                            f.recv.0 as u32,
                            WORLD,
                            f.tag as u32,
                            f.bytes,
                        ),
                    )?;
                }
            }
            Step::End(it) => {
                for f in flows(in_flows, it) {
                    a.check(
                        "OTF2_EvtWriter_MpiRecv",
                        OTF2_EvtWriter_MpiRecv(
                            w,
                            null,
                            it.end,
                            f.send.0 as u32,
                            WORLD,
                            f.tag as u32,
                            f.bytes,
                        ),
                    )?;
                }
                if let Some(coll) = &it.collective {
                    a.check(
                        "OTF2_EvtWriter_MpiCollectiveEnd",
                        OTF2_EvtWriter_MpiCollectiveEnd(
                            w,
                            null,
                            it.end,
                            collective_op(&coll.name),
                            WORLD,
                            coll.root.unwrap_or(OTF2_UNDEFINED_UINT32),
                            0,
                            0,
                        ),
                    )?;
                }
                let region = defs.region(it);
                a.check(
                    "OTF2_EvtWriter_Leave",
                    OTF2_EvtWriter_Leave(w, null, it.end, region),
                )?;
            }
        }
    }
    Ok(())
}

/// The global definitions (steps 1, 2, 6 and the regions of 3).
fn definitions(
    a: &Archive,
    s: &Scene,
    locations: &[Location<'_>],
    counts: &[u64],
    defs: &mut Defs,
    (zero, last, real_zero): (u64, u64, u64),
) -> Result<(), ExportError> {
    let job = defs.string("mttl job");
    let job_class = defs.string("job");
    let world = defs.string("mttl world");
    let ranks_name = defs.string("ranks");
    let rank_names: Vec<u32> = (0..s.ranks.len())
        .map(|r| defs.string(&format!("rank {r}")))
        .collect();
    let location_names: Vec<u32> = locations.iter().map(|l| defs.string(&l.name)).collect();
    // SAFETY: see `write`.
    let w = a.handle("OTF2_Archive_GetGlobalDefWriter", unsafe {
        OTF2_Archive_GetGlobalDefWriter(a.ptr)
    })?;
    let strings: Vec<CString> = defs.strings.iter().map(|s| c(s)).collect();
    let n = s.ranks.len() as u32;
    let world_locations: Vec<u64> = (0..u64::from(n)).collect();
    // SAFETY: see `write`; `w` is the archive's global definition
    // writer, closed with the archive.
    unsafe {
        a.check(
            "OTF2_GlobalDefWriter_WriteClockProperties",
            OTF2_GlobalDefWriter_WriteClockProperties(
                w,
                1_000_000_000,
                zero,
                last.saturating_sub(zero),
                real_zero,
            ),
        )?;
        for (id, text) in strings.iter().enumerate() {
            a.check(
                "OTF2_GlobalDefWriter_WriteString",
                OTF2_GlobalDefWriter_WriteString(w, id as u32, text.as_ptr()),
            )?;
        }
        for (id, &name) in defs.parameter_list.iter().enumerate() {
            a.check(
                "OTF2_GlobalDefWriter_WriteParameter",
                OTF2_GlobalDefWriter_WriteParameter(w, id as u32, name, OTF2_PARAMETER_TYPE_STRING),
            )?;
        }
        for (id, &(name, role, paradigm)) in defs.region_list.iter().enumerate() {
            a.check(
                "OTF2_GlobalDefWriter_WriteRegion",
                OTF2_GlobalDefWriter_WriteRegion(
                    w,
                    id as u32,
                    name,
                    name,
                    name,
                    role,
                    paradigm,
                    0,
                    OTF2_UNDEFINED_UINT32,
                    0,
                    0,
                ),
            )?;
        }
        a.check(
            "OTF2_GlobalDefWriter_WriteSystemTreeNode",
            OTF2_GlobalDefWriter_WriteSystemTreeNode(w, 0, job, job_class, OTF2_UNDEFINED_UINT32),
        )?;
        for (rank, &name) in rank_names.iter().enumerate() {
            a.check(
                "OTF2_GlobalDefWriter_WriteLocationGroup",
                OTF2_GlobalDefWriter_WriteLocationGroup(
                    w,
                    rank as u32,
                    name,
                    OTF2_LOCATION_GROUP_TYPE_PROCESS,
                    0,
                    OTF2_UNDEFINED_UINT32,
                ),
            )?;
        }
        for ((loc, &name), &count) in locations.iter().zip(&location_names).zip(counts) {
            a.check(
                "OTF2_GlobalDefWriter_WriteLocation",
                OTF2_GlobalDefWriter_WriteLocation(
                    w,
                    loc.id,
                    name,
                    OTF2_LOCATION_TYPE_CPU_THREAD,
                    count,
                    loc.rank as u32,
                ),
            )?;
        }
        a.check(
            "OTF2_GlobalDefWriter_WriteGroup",
            OTF2_GlobalDefWriter_WriteGroup(
                w,
                0,
                ranks_name,
                OTF2_GROUP_TYPE_COMM_LOCATIONS,
                OTF2_PARADIGM_MPI,
                0,
                n,
                world_locations.as_ptr(),
            ),
        )?;
        a.check(
            "OTF2_GlobalDefWriter_WriteGroup",
            OTF2_GlobalDefWriter_WriteGroup(
                w,
                1,
                world,
                OTF2_GROUP_TYPE_COMM_GROUP,
                OTF2_PARADIGM_MPI,
                0,
                n,
                world_locations.as_ptr(),
            ),
        )?;
        a.check(
            "OTF2_GlobalDefWriter_WriteComm",
            OTF2_GlobalDefWriter_WriteComm(w, WORLD, world, 1, OTF2_UNDEFINED_UINT32, 0),
        )?;
    }
    Ok(())
}
