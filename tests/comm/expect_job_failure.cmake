# Runs COMMAND (its arguments separated by "|") and succeeds only when it exits with a non-zero status
# within TIMEOUT seconds and its output matches the regular expression EXPECT.
#   cmake -DCOMMAND=... -DEXPECT=... -DTIMEOUT=... -P expect_job_failure.cmake
string(REPLACE "|" ";" COMMAND "${COMMAND}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT ${TIMEOUT})
message("${out}${err}")
if(status STREQUAL "0")
  message(FATAL_ERROR "the job succeeded, but one of its ranks threw: it should have failed")
elseif(NOT status MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end by itself: ${status}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the job failed (status ${status}) without the expected message /${EXPECT}/")
endif()
message("job failed as expected (status ${status}) with the thrown message")
