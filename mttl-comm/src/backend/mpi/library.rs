//! What differs between MPI libraries and transports, decided once at
//! `init` from the library's name (`MPI_Get_library_version`), the tag
//! range and how Open MPI moves messages within a node: how large a batch
//! or a combined remote write may grow and still travel eagerly, and
//! whether whole messages of 4001-8000 bytes are split in two. Each choice
//! says why, in terms of how the library moves messages (`mttl-bench
//! rwrite` and `mttl-bench comm` show the differences).

use std::ffi::c_int;

use super::EAGER_MAX;

/// [`CommTuning::batch_len`](crate::CommTuning::batch_len) on the MPI library named `library` (as
/// `MPI_Get_library_version` starts): the provided 16 KiB, but on the
/// MPICH family 4 KiB, so that a batch (flushed from that size on, plus at
/// most one more message of up to 4 KiB) stays within the 8 KiB or so that
/// MPICH sends eagerly; above it MPICH's shared memory is much slower per
/// byte (small `nwrite`s batched by 16 KiB run at a fraction of the speed
/// they reach batched by 4 KiB). Open MPI's copies between processes make
/// larger batches cheaper there, so the same writes run faster batched by
/// 16 KiB.
pub(super) fn batch_len_for(library: &str) -> usize {
    if library.starts_with("MPICH") {
        4 << 10
    } else {
        16 << 10
    }
}

/// [`CommTuning::combine_len`](crate::CommTuning::combine_len) on the MPI library named `library`. Copying a
/// header and a body together costs the sender a copy and the receiver
/// another (cutting the body out), more than a second message from about
/// 2 KiB on with Open MPI's shared memory (`mttl-bench rwrite` shows
/// medium and large `nwrite`s markedly faster split). MPICH sends up to
/// about 8 KiB eagerly, and a second message costs more there than the
/// copies up to that size: 8 KiB (a header and 8 KiB still go eagerly;
/// past that, splitting wins).
pub(super) fn combine_len_for(library: &str) -> usize {
    if library.starts_with("MPICH") {
        8 << 10
    } else {
        2 << 10
    }
}

/// Where whole messages are split on the MPI library named `library`, with
/// tags up to `tag_ub` and markers from `marker_bit` (see
/// [`MpiComm::split_head`](super::MpiComm::split_head)), if Open MPI moves messages between processes
/// of a node through its shared-memory transport, `shared_memory`
/// ([`open_mpi_shared_memory`]): messages of [`EAGER_MAX`] + 1 to twice
/// that go as two messages, the first `EAGER_MAX` bytes under the tag plus
/// twice the marker bit, then the rest under the tag, both eagerly; the
/// receiver joins them (`posted.rs`). That transport sends a message past
/// its 4 KiB eager fragment by rendezvous: the receiver matches a header,
/// copies the data out of the sender's memory with a system call
/// (`process_vm_readv`) and acknowledges, which costs more than a second
/// eager message (a stream of such messages runs markedly faster split).
/// Other transports send such messages eagerly, and a second message only
/// costs (over Open MPI's TCP transport, split messages stream slower and
/// round trips take longer). So only messages to the same node are split
/// ([`MpiComm::splits_to`](super::MpiComm::splits_to)); nothing on MPICH
/// (eager up to 8 KiB on shared memory), nor where the tags leave no room
/// for the split heads' tags.
pub(super) fn split_head_for(
    library: &str,
    shared_memory: bool,
    tag_ub: c_int,
    marker_bit: c_int,
) -> Option<usize> {
    let room = marker_bit
        .checked_mul(3)
        .is_some_and(|top| top - 1 <= tag_ub);
    (library.starts_with("Open MPI") && shared_memory && room).then_some(EAGER_MAX)
}

/// Whether Open MPI moves messages within a node through its ob1 PML and
/// shared-memory BTL (vader), as it does by default without a UCX-capable
/// network: the PML and BTL lists the user set (`OMPI_MCA_pml`,
/// `OMPI_MCA_btl`, `None` if unset) allow them, and the UCX PML's plugin
/// is not loaded in this process (`loaded_objects`: the paths of the
/// shared objects mapped, `/proc/self/maps` on Linux; unknown, `None`,
/// counts as loaded).
pub(super) fn open_mpi_shared_memory(
    pml: Option<&str>,
    btl: Option<&str>,
    loaded_objects: Option<&str>,
) -> bool {
    let allows = |list: Option<&str>, names: &[&str]| match list.map(str::trim) {
        None | Some("") => true,
        Some(list) => match list.strip_prefix('^') {
            Some(excluded) => !excluded.split(',').any(|c| names.contains(&c.trim())),
            None => list.split(',').any(|c| names.contains(&c.trim())),
        },
    };
    allows(pml, &["ob1"])
        && allows(btl, &["vader", "sm"])
        && loaded_objects.is_some_and(|maps| !maps.contains("mca_pml_ucx"))
}

#[cfg(test)]
mod tests {
    use super::super::EAGER_MAX;
    use super::{batch_len_for, combine_len_for, open_mpi_shared_memory, split_head_for};

    #[test]
    fn batches_and_combined_writes_stay_eager_on_mpich() {
        assert_eq!(batch_len_for("MPICH 4.0.2"), 4 << 10);
        assert_eq!(batch_len_for("Open MPI v4.1.4"), 16 << 10);
        assert_eq!(batch_len_for("an unnamed MPI library"), 16 << 10);
        assert_eq!(combine_len_for("MPICH 4.0.2"), 8 << 10);
        assert_eq!(combine_len_for("Open MPI v4.1.4"), 2 << 10);
    }

    #[test]
    fn messages_are_split_on_open_mpi_shared_memory_when_the_tags_leave_room() {
        let open_mpi = "Open MPI v4.1.4";
        let split =
            |shared, tag_ub, marker_bit| split_head_for(open_mpi, shared, tag_ub, marker_bit);
        assert_eq!(split(true, i32::MAX, 32768), Some(EAGER_MAX));
        // Split heads take the tags from twice the marker bit to thrice.
        assert_eq!(split(true, 3 * 32768 - 1, 32768), Some(EAGER_MAX));
        assert_eq!(split(true, 3 * 32768 - 2, 32768), None);
        assert_eq!(split(true, i32::MAX, i32::MAX / 2), None);
        assert_eq!(split(false, i32::MAX, 32768), None);
        assert_eq!(split_head_for("MPICH 4.0.2", true, i32::MAX, 32768), None);
    }

    #[test]
    fn shared_memory_is_ob1_and_vader_without_ucx() {
        let maps = Some("7f00 r-xp /usr/lib/openmpi/lib/openmpi3/mca_btl_vader.so\n");
        assert!(open_mpi_shared_memory(None, None, maps));
        assert!(open_mpi_shared_memory(
            Some("ob1"),
            Some("self,vader"),
            maps
        ));
        assert!(open_mpi_shared_memory(None, Some("^tcp,openib"), maps));
        assert!(open_mpi_shared_memory(None, Some("sm,self"), maps));
        assert!(!open_mpi_shared_memory(Some("ucx"), None, maps));
        assert!(!open_mpi_shared_memory(None, Some("tcp,self"), maps));
        assert!(!open_mpi_shared_memory(None, Some("^vader"), maps));
        let ucx = Some("7f00 r-xp /usr/lib/openmpi/lib/openmpi3/mca_pml_ucx.so\n");
        assert!(!open_mpi_shared_memory(None, None, ucx));
        assert!(!open_mpi_shared_memory(None, None, None));
    }
}
