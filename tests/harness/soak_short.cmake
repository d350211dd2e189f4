# ctest soak_short (label soak): a 12-cycle `wsbench soak` must pass (every update exact, RSS, page cache and open
# fds flat) and print its figures. Run as: cmake -DWSBENCH=path/to/wsbench -DPROFILES=dir -P soak_short.cmake
execute_process(COMMAND ${WSBENCH} --profiles ${PROFILES} soak --cycles 12 --warmup 4
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wsbench soak exited with ${rc}: ${err}")
endif()
foreach(expected
    "exact: 12/12 updates"
    "# resource +unit +start +end +max deviation +limit +verdict\n# +\\(%\\) +\\(%\\)\n"
    "\n  RSS +bytes +[0-9]+ +[0-9]+ +[0-9]+\\.[0-9][0-9] +2\\.00 +flat\n"
    "\n  page cache, soak files +bytes +[0-9]+ +[0-9]+ +[0-9]+\\.[0-9][0-9] +2\\.00 +flat\n"
    "\n  open file descriptors +fds +([0-9]+) +([0-9]+) +0\\.00 +2\\.00 +flat\n"
    "\nsoak: PASS\n")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "wsbench soak printed no line matching '${expected}'")
  endif()
endforeach()
