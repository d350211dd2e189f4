# ctest soak_short (label soak): a 16-cycle `wsbench soak` must pass (every update exact, RSS, page cache and open
# fds flat) and print its figures. Run as: cmake -DWSBENCH=path/to/wsbench -DPROFILES=dir -P soak_short.cmake
# Eight warm-up cycles: RSS takes one step of about 250 KiB (1.2% of the tiny model's 21 MB) between cycles 4 and 8,
# the allocator settling its per-thread arenas, and stays there for 100 cycles; with 4 warm-up cycles that step falls
# inside the window and a loaded CI host can push it past 2%.
execute_process(COMMAND ${WSBENCH} --profiles ${PROFILES} soak --cycles 16 --warmup 8
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wsbench soak exited with ${rc}: ${err}")
endif()
foreach(expected
    "exact: 16/16 updates"
    "# resource +unit +start +end +max deviation +limit +verdict\n# +\\(%\\) +\\(%\\)\n"
    "\n  RSS +bytes +[0-9]+ +[0-9]+ +[0-9]+\\.[0-9][0-9] +2\\.00 +flat\n"
    "\n  page cache, soak files +bytes +[0-9]+ +[0-9]+ +[0-9]+\\.[0-9][0-9] +2\\.00 +flat\n"
    "\n  open file descriptors +fds +([0-9]+) +([0-9]+) +0\\.00 +2\\.00 +flat\n"
    "\nsoak: PASS\n")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "wsbench soak printed no line matching '${expected}'")
  endif()
endforeach()
